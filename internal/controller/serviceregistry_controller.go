// Package controller is the ServiceRegistry reconciler (its assembly with the other
// controllers is operator's). A reconcile gathers (the registry's pods: regcache), decides (eligibility.Decide per
// pod, tenancy, overlap, the node Lease guard), applies (xDS, warm-ups, the stores through
// storesync, the readiness gates through gates) and reports (regstatus.Build, then report's
// Events and gauges, then the statuswriter), all over one scope (phases.go). The parts it
// delegates to live in the packages below it: storesync, nodeliveness, gates, enqueue,
// regcache, report, statuswriter, deployment (the Deployment reconciler) and ctrlrt.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller/ctrlrt"
	"github.com/registrar-dev/registrar/internal/controller/enqueue"
	"github.com/registrar-dev/registrar/internal/controller/gates"
	"github.com/registrar-dev/registrar/internal/controller/nodeliveness"
	"github.com/registrar-dev/registrar/internal/controller/regcache"
	"github.com/registrar-dev/registrar/internal/controller/report"
	"github.com/registrar-dev/registrar/internal/controller/statuswriter"
	"github.com/registrar-dev/registrar/internal/controller/storesync"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/leaseguard"
	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/selindex"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/internal/tenancy"
	"github.com/registrar-dev/registrar/internal/warmup"
)

// Finalizer keeps a ServiceRegistry until its endpoints have left the store.
const Finalizer = "registrar.dev/store-cleanup"

// ServiceRegistryReconciler makes the store hold exactly the eligible pods of each
// ServiceRegistry, and reports what the store holds in the registry's status.
type ServiceRegistryReconciler struct {
	client.Client
	// Stores are the installation's named stores: each registry is published to those its
	// spec.stores names (else the defaults), each planned, applied and reported on its own, so
	// that one store down never holds back another. A single store is one named store.
	Stores *multi.Stores
	// StoreName describes the store in status messages (e.g. its endpoints).
	StoreName string
	// Recorder emits Events on registries.
	Recorder recorder.EventRecorder
	// Clock stamps registeredAt and status times; clock.RealClock{} in production.
	Clock clock.PassiveClock
	// Cluster is written into each endpoint's cluster field.
	Cluster string
	// Warmup sends warm-up requests to gated pods.
	Warmup *warmup.Runner
	// CallerCacheSeconds is the callers' cache TTL assumed when spec.drain.callerCacheSeconds
	// is unset; it feeds the drain advice.
	CallerCacheSeconds int32
	// NodeLeaseTimeout caps how long after its node's last Lease renewal a pod stays
	// registered (the Lease's own duration applies when shorter); 0 ignores node Leases.
	NodeLeaseTimeout time.Duration
	// EndpointEvents is the operator-wide budget of the per-endpoint Registered and
	// Deregistered Events (one API write each): those beyond it are skipped and counted in
	// registrar_endpoint_events_skipped_total. Nil emits every one.
	EndpointEvents *rate.Limiter
	// Publisher, when set, follows every reconcile's verdicts besides the store (the xDS
	// server); nil publishes nowhere else.
	Publisher publish.Publisher
	// StoreHealth, when set, feeds the StoreHealthy condition (status.go); nil leaves
	// the condition out.
	StoreHealth StoreHealthSource
	// XDSGateAckTimeout, when positive (and Publisher tracks ACKs: the xDS server), makes a
	// new pod's readiness gate wait until every connected xDS client subscribed to its
	// registry has acknowledged it, or this long after it was first pushed.
	XDSGateAckTimeout time.Duration
	// LeaseGuard holds node Lease deregistrations when too many lapse at once (leaseguard);
	// the zero Config never holds.
	LeaseGuard leaseguard.Config
	// Tenancy is --service-name-tenancy: under tenancy.ModeShared any namespace publishes
	// under any service name; otherwise (the zero value too) a name belongs to the namespace
	// of its oldest registry unless it is shared (tenancy.go).
	Tenancy tenancy.Mode

	// syncer writes the stores and knows what they hold (storesync).
	syncer *storesync.Syncer
	// index maps pods to the registries selecting them and back (nil outside a manager:
	// pods are then listed from the client by selector).
	index *selindex.Index
	// selectors remembers each registry's parsed label selector (the zero value works).
	selectors selindex.Parsed
	warmups   *warmup.Tracker
	status    *statuswriter.Writer
	// report emits the reconcile's Events and measures its lags (report).
	report *report.Reporter
	// gates writes the readiness gates (gates).
	gates *gates.Writer
	// nodes are the node liveness facts: Leases, renewals seen, tombstones, the guard's
	// counts (nodeliveness).
	nodes *nodeliveness.Tracker
	// triggers notes what enqueued each registry, for registrar_reconciles_total.
	triggers *ctrlrt.Triggers
	// cache reads the registries, pods and nodes from the manager's cache (regcache).
	cache *regcache.Reader
	// startup is the triage of the initial list (enqueue.Startup; nil outside a manager),
	// told by the first reconcile that the workers run.
	startup *enqueue.Startup
}

// +kubebuilder:rbac:groups=discovery.registrar.dev,resources=serviceregistries,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=discovery.registrar.dev,resources=serviceregistries/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=discovery.registrar.dev,resources=serviceregistries/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// selectedPod is one pod the registry selects, with the reconcile's verdict on it.
type selectedPod struct {
	pod     *corev1.Pod
	verdict eligibility.Verdict
	// endpoint is the store value for an eligible or warming pod (its ports serve warm-up).
	endpoint store.Endpoint
}

// reconcileScope is what one reconcile of one ServiceRegistry gathers and decides.
type reconcileScope struct {
	reg *v1beta1.ServiceRegistry
	// originalStatus is the registry's status as the reconcile found it (the newest the
	// operator computed, when the cache does not show it yet): read only. Its slices are
	// shared with reg's until submitStatus replaces reg.Status with a status of its own
	// (regstatus.Build copies what it keeps), so nothing modifies reg.Status in place before.
	originalStatus v1beta1.ServiceRegistryStatus
	target         store.Scope
	selected       []selectedPod
	byName         map[string]int // index in selected, by pod name
	desired        map[string]store.Endpoint
	stored         map[string]store.Record // this registry's own records, alike in every store that answered
	// stores is what each target store held after this reconcile's sync (nil before it).
	stores   []storesync.StoreResult
	plan     plan.Plan
	selErr   error
	storeErr error
	// overlaps are pods an older registry of the same service also selects: pod → its name.
	overlaps map[string]string
	// refused, when set, says why the registry may not publish under its service name
	// (another namespace owns it: tenancy.go); it then publishes nothing.
	refused string
	// leaseCheck is the earliest time a node Lease of a registered pod lapses, if renewed
	// no more: the reconcile comes back then, as nothing else would trigger it.
	leaseCheck time.Time
	// observed is set once the registry's pods were read: only then is there a status to
	// report (before, the status is left as it is).
	observed bool
	// result is the soonest requeue the phases run so far asked for.
	result ctrl.Result
	// published is the Publisher's answer, once this reconcile published (nil before).
	published *publish.Result
	// xdsGateWait is set when a gate stays False until xDS clients acknowledge its pod.
	xdsGateWait bool
	// hold is set when the node Lease guard kept endpoints in the store (leaseguard.go).
	hold *guardHold
	// leases and zones are the node Leases and node zones this reconcile read, by node name:
	// a registry's pods share a few nodes, and each is read from the cache once.
	leases map[string]*eligibility.NodeLease
	zones  map[string]string
	// ports are the last endpoint's resolved ports: a registry's pods resolve the same ports
	// as a rule, and their endpoints (kept as the store's records until they change) then
	// share one map. Nothing modifies an endpoint's ports once built.
	ports map[string]int32
}

// Selected is the selected pod of this name and its verdict, if any (report.Pods).
func (s *reconcileScope) Selected(name string) (*corev1.Pod, eligibility.Verdict, bool) {
	i, ok := s.byName[name]
	if !ok {
		return nil, eligibility.Verdict{}, false
	}
	return s.selected[i].pod, s.selected[i].verdict, true
}

// All yields every selected pod with its verdict (report.Pods).
func (s *reconcileScope) All(yield func(*corev1.Pod, eligibility.Verdict) bool) {
	for _, p := range s.selected {
		if !yield(p.pod, p.verdict) {
			return
		}
	}
}

// Reconcile syncs one ServiceRegistry. A registry that is gone is forgotten, one being
// deleted is finalized; any other runs its phases over one reconcileScope (see phases.go):
// gather and decide, then apply (warm-ups, the store, readiness gates). Its status is
// computed from the scope and submitted when Reconcile returns, whatever the phases did.
func (r *ServiceRegistryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.triggers.CountReconcile(req)
	if r.startup != nil {
		r.startup.Started()
	}
	reg := &v1beta1.ServiceRegistry{}
	if err := r.Get(ctx, req.NamespacedName, reg); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get ServiceRegistry %s: %w", req, err)
	}
	if !reg.DeletionTimestamp.IsZero() {
		r.useNewestStatus(reg)
		return ctrl.Result{}, r.finalize(ctx, reg)
	}
	if err := r.ensureFinalizer(ctx, reg); err != nil {
		return ctrl.Result{}, err
	}
	r.useNewestStatus(reg) // after the finalizer patch, which returns the server's status
	s := &reconcileScope{reg: reg, originalStatus: reg.Status, target: scopeOf(reg)}
	defer r.patchStatus(s)
	return doReconcile(ctx, s, []reconcilePhase{
		r.reconcilePods,       // gather and decide: the selected pods and the verdict on each
		r.reconcileLeaseGuard, // decide: hold node Lease removals when too many lapse at once
		r.reconcilePublish,    // apply: the verdicts to xDS, unless they wait for the store's weights
		r.reconcileWarmups,    // apply: background warm-ups of the pods warming up
		r.reconcileStore,      // apply: the difference, written to every store of the registry
		r.reconcileGates,      // apply: readiness gates, for what the store acknowledged
	})
}

// forget drops what the operator keeps about a registry that no longer exists.
func (r *ServiceRegistryReconciler) forget(name types.NamespacedName) {
	r.syncer.Forget(name)
	r.triggers.Forget(name)
	if r.index != nil {
		r.index.DeleteRegistry(name.Namespace, name.Name)
	}
	r.warmups.Sync(name, nil)
	r.status.Forget(name)
	r.selectors.Forget(name)
	report.ForgetEndpointStates(name)
	r.unpublish(name)
	r.forgetLeaseGuard(name)
}

// GateRetry is how soon a reconcile whose gate flip failed comes back when it also has a
// re-check time to keep (a node Lease lapse, a key conflict).
const GateRetry = time.Second

// gateFlipFailed returns what Reconcile returns after a failed gate flip. controller-runtime
// drops a Result returned together with an error, so an error is returned only when res asks
// for nothing (the rate limiter's backoff retries it); otherwise the error is logged and res
// is kept, brought forward to GateRetry at the latest, so that the node Lease re-check is
// never lost.
func gateFlipFailed(ctx context.Context, res ctrl.Result, err error) (ctrl.Result, error) {
	if res.IsZero() {
		return res, err
	}
	log.FromContext(ctx).Error(err, "set readiness gates; retrying", "after", min(res.RequeueAfter, GateRetry))
	res.RequeueAfter = min(res.RequeueAfter, GateRetry)
	return res, nil
}

func scopeOf(reg *v1beta1.ServiceRegistry) store.Scope {
	return store.Scope{Service: reg.ResolvedServiceName(), Namespace: reg.Namespace, TTL: dnsTTL(reg)}
}

// dnsTTL is the registry's spec.dns.ttlSeconds; zero (the store's default) when unset.
func dnsTTL(reg *v1beta1.ServiceRegistry) time.Duration {
	if reg.Spec.DNS == nil || reg.Spec.DNS.TTLSeconds == 0 {
		return 0
	}
	return time.Duration(reg.Spec.DNS.TTLSeconds) * time.Second
}

func (r *ServiceRegistryReconciler) ensureFinalizer(ctx context.Context, reg *v1beta1.ServiceRegistry) error {
	if controllerutil.ContainsFinalizer(reg, Finalizer) {
		return nil
	}
	patch := client.MergeFrom(reg.DeepCopy())
	controllerutil.AddFinalizer(reg, Finalizer)
	if err := r.Patch(ctx, reg, patch); err != nil {
		return fmt.Errorf("add finalizer to %s/%s: %w", reg.Namespace, reg.Name, err)
	}
	return nil
}

// selectPods lists the registry's pods from the cache and classifies them.
func (r *ServiceRegistryReconciler) selectPods(ctx context.Context, s *reconcileScope) error {
	if r.index != nil {
		// Pod events reach the registry by this selector from now on (also an unusable one:
		// see selindex.Selects), and its pods are those the index holds for it.
		r.index.SetRegistry(s.reg.Namespace, s.reg.Name, &s.reg.Spec.Selector)
	}
	sel, err := r.selectors.Of(client.ObjectKeyFromObject(s.reg), &s.reg.Spec.Selector)
	if err != nil || sel.Empty() {
		s.selErr = errors.Join(err, errEmptySelector(sel))
		return nil
	}
	older, err := r.olderClaims(ctx, s.reg)
	if err != nil {
		return err
	}
	pods, err := r.cache.PodsOf(ctx, s.reg, sel)
	if err != nil {
		return err
	}
	s.desired = make(map[string]store.Endpoint, len(pods))
	s.byName = make(map[string]int, len(pods))
	s.selected = make([]selectedPod, 0, len(pods))
	for _, pod := range pods {
		p := r.decide(ctx, s, pod, older, false)
		if p.verdict.Eligible() {
			s.desired[p.pod.Name] = p.endpoint
		}
		s.byName[p.pod.Name] = len(s.selected)
		s.selected = append(s.selected, p)
	}
	return nil
}

// selectRegisteredPods is selectPods for a registry whose selector cannot be used (invalid,
// or empty): which pods it selects is unknown, so the safe rule applies — it registers no
// new pod, and of its own records keeps only those whose pod still exists with the same UID
// and is eligible by every other rule; the others are deregistered by the sync.
func (r *ServiceRegistryReconciler) selectRegisteredPods(ctx context.Context, s *reconcileScope) error {
	owned, err := r.syncer.OwnedAnywhere(ctx, s.reg, s.target)
	if err != nil {
		return err
	}
	older, err := r.olderClaims(ctx, s.reg)
	if err != nil {
		return err
	}
	s.desired = make(map[string]store.Endpoint, len(owned))
	s.byName = make(map[string]int, len(owned))
	s.selected = make([]selectedPod, 0, len(owned))
	for name, rec := range owned {
		pod := &corev1.Pod{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: s.reg.Namespace, Name: name}, pod); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("get pod %s/%s: %w", s.reg.Namespace, name, err)
		}
		if string(pod.UID) != rec.UID {
			continue
		}
		p := r.decide(ctx, s, pod, older, false)
		if p.verdict.Eligible() {
			s.desired[p.pod.Name] = p.endpoint
		}
		s.byName[p.pod.Name] = len(s.selected)
		s.selected = append(s.selected, p)
	}
	return nil
}

// decide gathers the facts the verdict on one pod depends on (the older registry owning it,
// its ports, its node's Lease, whether the registry's selector is usable, whether the node
// Lease guard holds its removal, now) and hands them to the one verdict chain,
// eligibility.Decide: no verdict is written anywhere else. It notes the older owner and the
// time the verdict changes by itself (a node Lease lapsing) in the scope, and builds the
// endpoint of an eligible or warming pod.
func (r *ServiceRegistryReconciler) decide(ctx context.Context, s *reconcileScope, pod *corev1.Pod, older []claim, held bool) selectedPod {
	f := eligibility.Facts{Pod: pod, WarmupRequired: s.reg.Spec.Warmup != nil, LeaseMaxAge: r.NodeLeaseTimeout, Now: r.Clock.Now(),
		NameRefused: s.refused != "", SelectorUnusable: s.selErr != nil, DeregistrationHeld: held}
	f.OlderClaim = olderClaimOn(pod, older)
	ports, err := eligibility.ResolvePortsLike(s.reg.Spec.Ports, pod, s.ports)
	if err != nil {
		f.PortErr = err
		log.FromContext(ctx).V(1).Info("pod not registered", "pod", pod.Name, "reason", err.Error())
	}
	if r.NodeLeaseTimeout > 0 && pod.Spec.NodeName != "" {
		f.NodeLease = r.scopeLeaseOf(ctx, s, pod.Spec.NodeName)
	}
	d := eligibility.Decide(f)
	p := selectedPod{pod: pod, verdict: d.Verdict}
	if f.OlderClaim != "" {
		if s.overlaps == nil {
			s.overlaps = map[string]string{}
		}
		s.overlaps[pod.Name] = f.OlderClaim
	}
	if !d.RecheckAt.IsZero() && (s.leaseCheck.IsZero() || d.RecheckAt.Before(s.leaseCheck)) {
		s.leaseCheck = d.RecheckAt
	}
	if p.verdict.State != v1beta1.EndpointRegistered && p.verdict.State != v1beta1.EndpointWarmingUp {
		return p // the chain registers no pod whose ports do not resolve (f.PortErr)
	}
	// ports is s.ports itself when the same as the last endpoint's: the registry's endpoints
	// share one map.
	s.ports = ports
	p.endpoint = eligibility.EndpointWithPorts(s.reg, pod, eligibility.Placement{Zone: r.zoneOf(ctx, s, pod), Cluster: r.Cluster}, ports)
	return p
}

func errEmptySelector(sel labels.Selector) error {
	if sel != nil && sel.Empty() {
		return errors.New("selector matches every pod")
	}
	return nil
}

// zoneOf is the zone of the pod's node (regcache.Reader.Zone); empty when unknown. Each node
// is read once per reconcile (s.zones).
func (r *ServiceRegistryReconciler) zoneOf(ctx context.Context, s *reconcileScope, pod *corev1.Pod) string {
	if pod.Spec.NodeName == "" {
		return ""
	}
	if zone, ok := s.zones[pod.Spec.NodeName]; ok {
		return zone
	}
	zone := r.cache.Zone(ctx, pod.Spec.NodeName)
	if s.zones == nil {
		s.zones = map[string]string{}
	}
	s.zones[pod.Spec.NodeName] = zone
	return zone
}

// finalize removes the registry's endpoints from the store, then its finalizer.
func (r *ServiceRegistryReconciler) finalize(ctx context.Context, reg *v1beta1.ServiceRegistry) error {
	if !controllerutil.ContainsFinalizer(reg, Finalizer) {
		return nil
	}
	name := client.ObjectKeyFromObject(reg)
	r.unpublish(name)
	scopes := []store.Scope{scopeOf(reg)}
	olds, complete := r.syncer.OldServices(ctx, reg, scopes[0].Service)
	if !complete {
		err := errors.New("the store could not be searched for records under earlier service names")
		r.Recorder.Eventf(reg, nil, corev1.EventTypeWarning, v1beta1.ReasonStoreUnreachable, "Cleanup",
			"cannot remove endpoints from the store; deletion waits until it is reachable: %v", err)
		return err
	}
	for _, old := range olds {
		scopes = append(scopes, store.Scope{Service: old, Namespace: reg.Namespace})
	}
	r.syncer.ForgetRecords(name)
	r.warmups.Sync(name, nil)
	r.gates.Acks.Forget(reg.UID)
	r.report.ForgetLags(reg.UID)
	for _, target := range scopes {
		if err := r.syncer.RemoveOwned(ctx, reg, target); err != nil {
			r.Recorder.Eventf(reg, nil, corev1.EventTypeWarning, v1beta1.ReasonStoreUnreachable, "Cleanup",
				"cannot remove endpoints from the store; deletion waits until it is reachable: %v", err)
			return err
		}
	}
	patch := client.MergeFrom(reg.DeepCopy())
	controllerutil.RemoveFinalizer(reg, Finalizer)
	if err := r.Patch(ctx, reg, patch); err != nil {
		return fmt.Errorf("remove finalizer from %s: %w", name, err)
	}
	return nil
}

// useNewestStatus replaces the cached status with the newest one this operator computed,
// which the cache may not show yet (the status writer writes it asynchronously). Call it
// once per reconcile, on the status as read: it compares that with the newest one.
func (r *ServiceRegistryReconciler) useNewestStatus(reg *v1beta1.ServiceRegistry) {
	if st, ok := r.status.Base(client.ObjectKeyFromObject(reg), reg.UID, reg.Status); ok {
		reg.Status = st
	}
}
