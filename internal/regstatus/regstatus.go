// Package regstatus computes a ServiceRegistry's status from what the reconciler observed:
// the selected pods, their verdicts and the records actually in the store. It is pure, so
// every condition and count is table-tested without a cluster.
package regstatus

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/store"
)

// MaxEndpoints bounds status.endpoints so that a large selection cannot grow the object
// past the API server's size limit; counts always cover every pod.
const MaxEndpoints = 256

// Pod is what the status needs of one selected pod.
type Pod struct {
	Name, UID, IP string
	Verdict       eligibility.Verdict
	// DrainUntil is when a terminating pod's drain ends.
	DrainUntil *time.Time
}

// Drain is the input of the drain advice.
type Drain struct {
	Seconds            int32
	CallerCacheSeconds int32
	// DeregistrationLag is the slowest recent deregistration the operator measured.
	DeregistrationLag time.Duration
	// XDSPushLag is the slowest recent push of the registry's endpoints to an xDS client
	// (publish → ACK); 0 without the xDS server or before any ACK.
	XDSPushLag time.Duration
}

// Configuration problems of a ServiceRegistry generated from Deployment annotations.
type Configuration struct {
	// Generated is true for a registry the operator made from a Deployment's annotations.
	Generated bool
	// Problems are the annotation errors; empty when the annotations are valid.
	Problems string
}

// Input is everything one reconcile observed.
type Input struct {
	Generation  int64
	ServiceName string
	Pods        []Pod
	// Stored are the registry's own records in the store, keyed by pod, as of the last
	// successful list or write. Nil when the store could not be read.
	Stored map[string]store.Record
	// Conflicts are pods whose key another owner holds.
	Conflicts []string
	// Overlaps are pods an older ServiceRegistry of the same service also selects, each with
	// that registry's name; this registry writes nothing for them.
	Overlaps map[string]string
	// SelectorErr is set when spec.selector could not be parsed; nothing was written.
	SelectorErr error
	// Refused, when set, is why the registry may not publish under its service name (another
	// namespace owns it: internal/tenancy): it publishes nothing.
	Refused string
	// StoreErr is set when the last list or write failed.
	StoreErr error
	// StoreName says which store, for messages (e.g. its endpoints).
	StoreName string
	// StoreStallAfter is how long the store may stay unreachable before the registry
	// reports Stalled=True; DefaultStoreStallAfter when zero.
	StoreStallAfter time.Duration
	Drain           Drain
	Config          Configuration
	// Injection reports, for a registry with spec.injection.enabled, the selected pods the
	// webhook did not mutate; nil when injection is not enabled.
	Injection *Injection
	// Stores is status.stores: each named store as the reconcile left it (nil with a single
	// store).
	Stores []v1beta1.StoreStatus
	// StoreHealth is the self-monitoring verdict on the registry's stores (StoreHealthy); nil
	// leaves the condition as it was (no monitoring, or the verdict is unknown yet).
	StoreHealth *StoreHealth
	// Hold, when set, is the node Lease guard's hold of this reconcile (DeregistrationHeld);
	// nil removes the condition.
	Hold *Hold
	// Published, when set, is the xDS server's answer to this reconcile's verdicts
	// (XDSPublished); nil leaves the condition as it was (no xDS server).
	Published *Published
	Now       time.Time
}

// Injection is the input of the PodsInjected condition.
type Injection struct {
	// Unmutated are the selected, not terminating pods without the registrar.dev/injected
	// annotation, each with what it lacks.
	Unmutated []Unmutated
}

// Unmutated is one pod the webhook did not mutate.
type Unmutated struct {
	Pod   string
	Lacks string // e.g. "the readiness gate and the preStop drain"
}

// Build returns the new status; old supplies the transition times to keep.
func Build(old v1beta1.ServiceRegistryStatus, in Input) v1beta1.ServiceRegistryStatus {
	st := v1beta1.ServiceRegistryStatus{
		// The status, including a failure, always describes the generation just evaluated,
		// so that kstatus reads the Reconciling and Stalled conditions rather than
		// "generation not observed" (see health.go).
		ObservedGeneration: in.Generation,
		Conditions:         append([]metav1.Condition(nil), old.Conditions...),
		ServiceName:        in.ServiceName,
	}
	if in.SelectorErr != nil && in.Refused == "" {
		configuredCondition(&st, in)
		st.ServiceName, st.Registered = old.ServiceName, old.Registered
		if in.Stored != nil {
			st.Registered = int32(len(in.Stored))
		}
		setCondition(&st, in.Generation, in.Now, v1beta1.ConditionReady, false, v1beta1.ReasonInvalidSelector,
			fmt.Sprintf("spec.selector is invalid: no new pod is registered, and only endpoints of pods still eligible are kept; fix the selector: %v", in.SelectorErr))
		healthConditions(&st, old, in)
		outcomeConditions(&st, in)
		return st
	}
	configuredCondition(&st, in)
	injectedCondition(&st, in)
	st.Endpoints, st.Desired, st.Warming, st.Draining = endpoints(old.Endpoints, in)
	st.Drain = drainAdvice(&st, in)
	st.Registered = int32(len(in.Stored))
	if in.Stored == nil {
		st.Registered = old.Registered // the store could not be read: keep the last known count
	}
	storeCondition(&st, in)
	readyCondition(&st, in)
	healthConditions(&st, old, in)
	outcomeConditions(&st, in)
	return st
}

func endpoints(old []v1beta1.EndpointStatus, in Input) (eps []v1beta1.EndpointStatus, desired, warming, draining int32) {
	prev := make(map[string]v1beta1.EndpointStatus, len(old))
	for _, e := range old {
		prev[e.Pod] = e
	}
	conflicts := make(map[string]bool, len(in.Conflicts))
	for _, p := range in.Conflicts {
		conflicts[p] = true
	}
	pods := append([]Pod(nil), in.Pods...)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for _, p := range pods {
		e := v1beta1.EndpointStatus{Pod: p.Name, UID: p.UID, IP: p.IP, State: p.Verdict.State, Reason: p.Verdict.Reason}
		switch {
		case !p.Verdict.Eligible():
		case conflicts[p.Name]:
			e.State, e.Reason = v1beta1.EndpointPending, v1beta1.ReasonKeyConflict
		case in.Stored == nil && prev[p.Name].UID == p.UID && prev[p.Name].State == v1beta1.EndpointRegistered:
			e.State, e.Reason = prev[p.Name].State, prev[p.Name].Reason // store unreadable: last known
		case !storedFor(in.Stored, p):
			e.State, e.Reason = v1beta1.EndpointPending, v1beta1.ReasonNotInStore
		}
		desired += count(p.Verdict.Eligible())
		warming += count(e.State == v1beta1.EndpointWarmingUp)
		draining += count(e.State == v1beta1.EndpointDraining)
		if p.DrainUntil != nil && e.State == v1beta1.EndpointDraining {
			until := metav1.NewTime(*p.DrainUntil)
			e.DrainUntil = &until
		}
		since := metav1.NewTime(in.Now)
		if was, ok := prev[p.Name]; ok && was.UID == e.UID && was.State == e.State && was.Since != nil {
			since = *was.Since
		}
		e.Since = &since
		if len(eps) < MaxEndpoints {
			eps = append(eps, e)
		}
	}
	return eps, desired, warming, draining
}

func storedFor(stored map[string]store.Record, p Pod) bool {
	r, ok := stored[p.Name]
	return ok && r.UID == p.UID && r.Address == p.IP
}

func count(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

func storeCondition(st *v1beta1.ServiceRegistryStatus, in Input) {
	if in.StoreErr != nil && errors.Is(in.StoreErr, store.ErrClusterClaimed) {
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionStoreSynced, false, v1beta1.ReasonClusterIdentityClash,
			fmt.Sprintf("refusing to write store %s: %v", in.StoreName, in.StoreErr))
		return
	}
	if in.StoreErr != nil {
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionStoreSynced, false, v1beta1.ReasonStoreUnreachable,
			fmt.Sprintf("cannot read or write store %s: %v; retrying with backoff, existing endpoints are left in place", in.StoreName, in.StoreErr))
		return
	}
	setCondition(st, in.Generation, in.Now, v1beta1.ConditionStoreSynced, true, v1beta1.ReasonSynced,
		fmt.Sprintf("%d endpoints of service %q in store %s match the eligible pods", len(in.Stored), in.ServiceName, in.StoreName))
}

func readyCondition(st *v1beta1.ServiceRegistryStatus, in Input) {
	var missing []string
	for _, p := range in.Pods {
		if p.Verdict.Reason == v1beta1.ReasonNamedPortMissing {
			missing = append(missing, p.Name)
		}
	}
	sort.Strings(missing)
	switch {
	case in.Refused != "":
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionReady, false, v1beta1.ReasonServiceNameOwnedElsewhere, in.Refused)
	case in.StoreErr != nil:
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionReady, false, v1beta1.ReasonStoreNotSynced,
			"the store could not be updated; see the StoreSynced condition")
	case len(in.Overlaps) > 0:
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionReady, false, v1beta1.ReasonSelectorOverlap, overlapMessage(in))
	case len(in.Conflicts) > 0:
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionReady, false, v1beta1.ReasonKeyConflict,
			fmt.Sprintf("the store keys of pods %s are owned by another ServiceRegistry or installation; give this registry a distinct spec.serviceName",
				strings.Join(first(in.Conflicts, 5), ", ")))
	case notInStore(st.Endpoints) > 0:
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionReady, false, v1beta1.ReasonNotInStore,
			fmt.Sprintf("%d eligible pods are not in the store yet; see status.endpoints", notInStore(st.Endpoints)))
	case len(missing) > 0:
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionReady, false, v1beta1.ReasonNamedPortMissing,
			fmt.Sprintf("pods %s have no container port named by spec.ports[].targetPort and are not registered",
				strings.Join(first(missing, 5), ", ")))
	default:
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionReady, true, v1beta1.ReasonAllRegistered,
			fmt.Sprintf("%d of %d eligible pods are registered (%d pods selected)", st.Desired, st.Desired, len(in.Pods)))
	}
}

// drainAdvice computes the recommended drain — the measured deregistration lag plus the
// longer of the callers' cache TTL and the measured xDS push lag (xDS clients keep no
// cache, store readers get no push: the drain must cover the slower of the two kinds),
// rounded up to a second — and the DrainSufficient condition.
func drainAdvice(st *v1beta1.ServiceRegistryStatus, in Input) *v1beta1.DrainStatus {
	lag := in.Drain.DeregistrationLag.Round(10 * time.Millisecond)
	push := in.Drain.XDSPushLag.Round(10 * time.Millisecond)
	if push == 0 && in.Drain.XDSPushLag > 0 {
		push = time.Millisecond // measured, and quick: still shown as measured
	}
	cache := time.Duration(in.Drain.CallerCacheSeconds) * time.Second
	staleness := lag + max(cache, push)
	recommended := int32((staleness + time.Second - 1) / time.Second)
	d := &v1beta1.DrainStatus{
		Seconds: in.Drain.Seconds, CallerCacheSeconds: in.Drain.CallerCacheSeconds,
		DeregistrationLagMillis: positiveMillis(lag), XDSPushLagMillis: positiveMillis(push), RecommendedSeconds: recommended,
	}
	why := fmt.Sprintf("cache %ds + deregistration lag %s", in.Drain.CallerCacheSeconds, lag)
	if push > cache {
		why = fmt.Sprintf("deregistration lag %s + xDS push lag %s, longer than the callers' cache of %ds", lag, push, in.Drain.CallerCacheSeconds)
	}
	if in.Drain.Seconds < recommended {
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionDrainSufficient, false, v1beta1.ReasonDrainTooShort,
			fmt.Sprintf("spec.drain.seconds is %d but callers may hold a terminating pod for %s (%s): set spec.drain.seconds to at least %d",
				in.Drain.Seconds, staleness, why, recommended))
		return d
	}
	setCondition(st, in.Generation, in.Now, v1beta1.ConditionDrainSufficient, true, v1beta1.ReasonDrainCoversCallers,
		fmt.Sprintf("terminating pods keep serving for %ds after deregistration; callers may hold them for %s (%s)",
			in.Drain.Seconds, staleness, why))
	return d
}

// positiveMillis is d in milliseconds, or nil when it is not positive (status leaves
// deregistrationLagMillis unset while no lag was measured).
func positiveMillis(d time.Duration) *int64 {
	if ms := d.Milliseconds(); ms > 0 {
		return &ms
	}
	return nil
}

// maxNamed is how many pods a condition message names.
const maxNamed = 5

// injectedCondition sets PodsInjected on a registry with injection enabled, and removes it
// otherwise.
func injectedCondition(st *v1beta1.ServiceRegistryStatus, in Input) {
	if in.Injection == nil {
		removeCondition(&st.Conditions, v1beta1.ConditionPodsInjected)
		return
	}
	un := in.Injection.Unmutated
	if len(un) == 0 {
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionPodsInjected, true, v1beta1.ReasonAllPodsInjected,
			"every selected pod carries the readiness gate and the preStop drain the webhook injects")
		return
	}
	named := make([]string, 0, maxNamed)
	for _, u := range un[:min(len(un), maxNamed)] {
		named = append(named, fmt.Sprintf("%s (lacks %s)", u.Pod, u.Lacks))
	}
	more := ""
	if len(un) > maxNamed {
		more = fmt.Sprintf(" and %d more", len(un)-maxNamed)
	}
	setCondition(st, in.Generation, in.Now, v1beta1.ConditionPodsInjected, false, v1beta1.ReasonPodsNotInjected,
		fmt.Sprintf("%d selected pod(s) were admitted without registrar's webhook (it was unreachable, or they predate the registry): %s%s; they register without warm-up and exit without a drain; restart their rollout (kubectl rollout restart) once the webhook is up",
			len(un), strings.Join(named, ", "), more))
}

func configuredCondition(st *v1beta1.ServiceRegistryStatus, in Input) {
	switch {
	case !in.Config.Generated:
		removeCondition(&st.Conditions, v1beta1.ConditionConfigured)
	case in.Config.Problems != "":
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionConfigured, false, v1beta1.ReasonInvalidAnnotation,
			"the Deployment's registrar.dev/ annotations have problems; the valid ones apply: "+in.Config.Problems)
	default:
		setCondition(st, in.Generation, in.Now, v1beta1.ConditionConfigured, true, v1beta1.ReasonAnnotationsValid,
			"generated from the Deployment's registrar.dev/ annotations")
	}
}

// overlapMessage names the pods held back and the older registries that publish them.
func overlapMessage(in Input) string {
	pods := make([]string, 0, len(in.Overlaps))
	owners := map[string]bool{}
	for pod, owner := range in.Overlaps {
		pods = append(pods, pod)
		owners[owner] = true
	}
	sort.Strings(pods)
	names := make([]string, 0, len(owners))
	for o := range owners {
		names = append(names, o)
	}
	sort.Strings(names)
	return fmt.Sprintf("pods %s are also selected by the older ServiceRegistry %s of service %q, which publishes them; "+
		"this registry writes nothing for them: make the selectors disjoint or give this registry another spec.serviceName",
		strings.Join(first(pods, 5), ", "), strings.Join(first(names, 3), ", "), in.ServiceName)
}

func notInStore(eps []v1beta1.EndpointStatus) int {
	n := 0
	for _, e := range eps {
		if e.Reason == v1beta1.ReasonNotInStore {
			n++
		}
	}
	return n
}

func first(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string(nil), s[:n]...), fmt.Sprintf("and %d more", len(s)-n))
}

func setCondition(st *v1beta1.ServiceRegistryStatus, gen int64, now time.Time, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		LastTransitionTime: metav1.NewTime(now),
	})
}

// removeCondition is meta.RemoveStatusCondition without its allocation when the condition is
// absent (the common case: it runs for several conditions on every reconcile). When present,
// the conditions are copied without it, as meta does: the slice may share its array with the
// status the reconcile started from.
func removeCondition(conds *[]metav1.Condition, typ string) {
	if meta.FindStatusCondition(*conds, typ) != nil {
		meta.RemoveStatusCondition(conds, typ)
	}
}
