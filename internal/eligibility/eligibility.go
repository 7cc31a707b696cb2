// Package eligibility decides whether a pod's endpoint belongs in a registry's store — one
// ordered verdict chain (Decide) over facts the controller gathers — and builds the endpoint
// that is written. It is pure: no clients; the clock is a fact.
package eligibility

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
)

// Verdict is the endpoint state a pod calls for, and why.
type Verdict struct {
	State  v1beta1.EndpointState
	Reason string
}

// Eligible reports whether the pod's endpoint belongs in the store.
func (v Verdict) Eligible() bool { return v.State == v1beta1.EndpointRegistered }

// Classify applies the eligibility rule to a pod alone: a pod is eligible when it is not
// terminating, its phase is Running, it has an IP and its ContainersReady condition is True;
// a pod that carries the registrar.dev/ready readiness gate must also have finished its
// warm-up (see gated). It is Decide with no facts beyond the pod.
func Classify(pod *corev1.Pod, warmupRequired bool) Verdict {
	return Decide(Facts{Pod: pod, WarmupRequired: warmupRequired}).Verdict
}

func classifyContainers(pod *corev1.Pod) Verdict {
	switch {
	case pod.DeletionTimestamp != nil:
		return Verdict{v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating}
	case pod.Status.Phase == corev1.PodFailed:
		return Verdict{v1beta1.EndpointUnready, v1beta1.ReasonPodFailed}
	case pod.Status.Phase == corev1.PodSucceeded:
		return Verdict{v1beta1.EndpointUnready, v1beta1.ReasonPodSucceeded}
	case pod.Status.Phase == corev1.PodUnknown:
		return Verdict{v1beta1.EndpointUnready, v1beta1.ReasonPodPhaseUnknown}
	case pod.Status.Phase != corev1.PodRunning:
		return Verdict{v1beta1.EndpointPending, v1beta1.ReasonPodNotRunning}
	case pod.Status.PodIP == "":
		return Verdict{v1beta1.EndpointPending, v1beta1.ReasonNoPodIP}
	case !conditionTrue(pod, corev1.ContainersReady):
		return Verdict{v1beta1.EndpointUnready, v1beta1.ReasonContainersNotReady}
	}
	return Verdict{v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady}
}

// gated classifies a gated pod whose containers are ready. Its gate condition records warm-up
// durably: True (registered before) or reason WarmedUp means warm-up is done — unless a
// container restarted since (then the new process warms up again); reason WarmupFailed
// means it failed under onFailure=Block; anything else means it is warming up.
func gated(pod *corev1.Pod, warmupRequired bool) Verdict {
	c := GateCondition(pod)
	switch {
	case warmupRequired && c != nil && (c.Status == corev1.ConditionTrue || c.Reason == v1beta1.GateWarmedUp) &&
		restartedSince(pod, c.LastTransitionTime.Time):
		return Verdict{v1beta1.EndpointWarmingUp, v1beta1.ReasonContainerRestarted}
	case c != nil && c.Status == corev1.ConditionTrue:
		return Verdict{v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady}
	case c != nil && c.Reason == v1beta1.GateWarmedUp:
		return Verdict{v1beta1.EndpointRegistered, v1beta1.ReasonWarmedUp}
	case !warmupRequired:
		return Verdict{v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady}
	case c != nil && c.Reason == v1beta1.GateWarmupFailed:
		return Verdict{v1beta1.EndpointPending, v1beta1.ReasonWarmupFailed}
	}
	return Verdict{v1beta1.EndpointWarmingUp, v1beta1.ReasonWarmingUp}
}

// restartedSince reports whether a container of the pod restarted after t: it has restarted
// at least once and its running instance started after t. The kubelet may report a quick
// restart (SIGKILL, OOM kill) only once the new container is ready again, and a
// level-based reconcile may miss a short not-ready window; the start time is what stays.
// A fresh pod's containers (restartCount 0) never count, so a kubelet clock ahead of the
// operator's cannot make a new pod warm up twice.
func restartedSince(pod *corev1.Pod, t time.Time) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.RestartCount > 0 && cs.State.Running != nil && cs.State.Running.StartedAt.After(t) {
			return true
		}
	}
	return false
}

// HasGate reports whether the pod carries registrar's readiness gate.
func HasGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == v1beta1.ReadinessGate {
			return true
		}
	}
	return false
}

// GateCondition returns the pod's registrar.dev/ready condition, or nil.
func GateCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1beta1.ReadinessGate {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// GateWant is a value for the gate condition.
type GateWant struct {
	Status corev1.ConditionStatus
	Reason string
}

// GateFor returns the gate condition a gated pod should carry, given its verdict and whether
// the store holds its endpoint; ok is false when the current condition should stay as it is.
// The gate turns True only once the store has acknowledged the endpoint; it turns False when
// the containers stop being ready, so that the next start is warmed up again. A pod of a
// registry refused its service name gets a False gate saying so, unless the gate is already
// True (a serving pod is not taken out of its Kubernetes Services for it).
func GateFor(pod *corev1.Pod, v Verdict, stored bool) (want GateWant, ok bool) {
	if !HasGate(pod) {
		return GateWant{}, false
	}
	cur := GateCondition(pod)
	switch {
	case v.Eligible() && stored:
		want = GateWant{corev1.ConditionTrue, v1beta1.GateRegistered}
	case v.State == v1beta1.EndpointWarmingUp:
		want = GateWant{corev1.ConditionFalse, v1beta1.GateWarmingUp}
	case v.Reason == v1beta1.ReasonServiceNameOwnedElsewhere && (cur == nil || cur.Status != corev1.ConditionTrue):
		want = GateWant{corev1.ConditionFalse, v1beta1.GateServiceNameOwnedElsewhere}
	case v.State == v1beta1.EndpointUnready && v.Reason == v1beta1.ReasonContainersNotReady && cur != nil &&
		(cur.Status == corev1.ConditionTrue || cur.Reason == v1beta1.GateWarmedUp):
		want = GateWant{corev1.ConditionFalse, v1beta1.GateNotReady}
	default:
		return GateWant{}, false
	}
	if cur != nil && cur.Status == want.Status && cur.Reason == want.Reason {
		return GateWant{}, false
	}
	return want, true
}

// DrainUntil is when a terminating pod's drain of drainSeconds ends: its deletion was
// requested at deletionTimestamp minus the grace period. Nil for a pod not terminating.
func DrainUntil(pod *corev1.Pod, drainSeconds int32) *time.Time {
	if pod.DeletionTimestamp == nil {
		return nil
	}
	var grace int64
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	}
	t := pod.DeletionTimestamp.Add(time.Duration(int64(drainSeconds)-grace) * time.Second)
	return &t
}

func conditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Placement is where a pod runs, for the endpoint's node, zone and cluster fields.
type Placement struct {
	Zone    string
	Cluster string
}

// Endpoint builds the store value for an eligible pod of reg. It fails when a port given by
// targetPort names no container port of the pod.
func Endpoint(reg *v1beta1.ServiceRegistry, pod *corev1.Pod, at Placement) (store.Endpoint, error) {
	ports, err := resolvePorts(reg.Spec.Ports, pod)
	if err != nil {
		return store.Endpoint{}, err
	}
	return EndpointWithPorts(reg, pod, at, ports), nil
}

// EndpointWithPorts builds the store value for an eligible pod of reg whose ports were
// resolved already (ResolvePorts, ResolvePortsLike).
func EndpointWithPorts(reg *v1beta1.ServiceRegistry, pod *corev1.Pod, at Placement, ports map[string]int32) store.Endpoint {
	return store.Endpoint{
		Service:   reg.ResolvedServiceName(),
		Namespace: pod.Namespace,
		Pod:       pod.Name,
		UID:       string(pod.UID),
		Address:   pod.Status.PodIP,
		Ports:     ports,
		Node:      pod.Spec.NodeName,
		Zone:      at.Zone,
		Cluster:   at.Cluster,
		Owner:     string(reg.UID),
	}
}

// ResolvePorts resolves the registry's ports on the pod: a targetPort names a container port.
func ResolvePorts(specs []v1beta1.ServicePort, pod *corev1.Pod) (map[string]int32, error) {
	return resolvePorts(specs, pod)
}

// ResolvePortsLike is ResolvePorts, but returns like itself, allocating nothing, when the
// pod's ports resolve to exactly what like holds (a registry's pods resolve the same ports
// as a rule). like is only read; the caller must not modify what either returns.
func ResolvePortsLike(specs []v1beta1.ServicePort, pod *corev1.Pod, like map[string]int32) (map[string]int32, error) {
	if like == nil || len(like) != len(specs) {
		return resolvePorts(specs, pod)
	}
	for _, p := range specs {
		n, ok := p.Port, true
		if n == 0 {
			n, ok = containerPort(pod, p.TargetPort)
		}
		if v, in := like[p.Name]; !ok || !in || v != n {
			return resolvePorts(specs, pod) // also the error of a port that does not resolve
		}
	}
	return like, nil
}

func resolvePorts(specs []v1beta1.ServicePort, pod *corev1.Pod) (map[string]int32, error) {
	ports := make(map[string]int32, len(specs))
	for _, p := range specs {
		if p.Port != 0 {
			ports[p.Name] = p.Port
			continue
		}
		n, ok := containerPort(pod, p.TargetPort)
		if !ok {
			return nil, fmt.Errorf("port %q: pod %s has no container port named %q", p.Name, pod.Name, p.TargetPort)
		}
		ports[p.Name] = n
	}
	return ports, nil
}

// containerPort finds a named port in the pod's containers or native sidecars (init
// containers with restartPolicy Always), as Kubernetes resolves a Service's targetPort.
func containerPort(pod *corev1.Pod, name string) (int32, bool) {
	containers := pod.Spec.Containers
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers[:len(containers):len(containers)], c)
		}
	}
	for _, c := range containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// NodeLease is what eligibility needs of a node's coordination.k8s.io Lease, and of the
// node's fate: whether the Lease, or the Node itself, was seen deleted.
type NodeLease struct {
	RenewTime    time.Time
	DurationSecs int32
	// ObservedAt, when set, is when the operator saw this RenewTime arrive, on its own
	// clock. It then replaces RenewTime: the kubelet's clock may be skewed from the
	// operator's, and a renewal seen is proof the node was alive when it was seen.
	ObservedAt time.Time
	// Deleted: the Lease was deleted; the fields above are its last state. A deleted Lease
	// renews no more: the node lapses when that last renewal runs out, and only a new Lease
	// brings it back.
	Deleted bool
	// NodeDeleted: the Node was seen deleted (and not created again since): its pods are gone
	// with it, whatever its Lease says.
	NodeDeleted bool
}

// Gone reports whether the Lease or the Node was seen deleted: what the API server said,
// not what a lapse suggests.
func (l NodeLease) Gone() bool { return l.Deleted || l.NodeDeleted }

// NodeLost decides whether the pods of a node whose Lease (and fate) is l count as lost at
// now — their endpoints leave the store, reason NodeLeaseExpired — and when to decide again
// if nothing else changes:
//   - a Node seen deleted is lost at once, whether its Lease had lapsed or not: node deletion
//     means its pods are gone (the pod garbage collector deletes them 40 s or more later);
//   - otherwise the node is lost once its Lease lapsed (LeaseExpiry), the Lease still there
//     or deleted since (a deleted Lease renews no more); alive before, to be re-checked at
//     the expiry;
//   - a Lease with no renewal (or no duration and no maxAge) never lapses here.
//
// A lost node is re-checked every LapsedLeaseRecheck. A node with neither a Lease
// nor a deletion (or absence) seen is not judged at all: the caller passes no NodeLease.
func NodeLost(l NodeLease, maxAge time.Duration, now time.Time) (lost bool, recheckAt time.Time) {
	if l.NodeDeleted {
		return true, now.Add(LapsedLeaseRecheck)
	}
	expiry, ok := LeaseExpiry(l, maxAge)
	switch {
	case !ok:
		return false, time.Time{}
	case now.Before(expiry):
		return false, expiry // registered until then, unless renewed
	}
	return true, now.Add(LapsedLeaseRecheck)
}

// LeaseExpiry is when a node whose Lease was last renewed as given counts as lost: the
// renewal plus the lease duration, capped at maxAge (0: no cap). A node without a renewal
// never expires here (the node controller handles it).
func LeaseExpiry(l NodeLease, maxAge time.Duration) (time.Time, bool) {
	if l.RenewTime.IsZero() {
		return time.Time{}, false
	}
	renewed := l.RenewTime
	if !l.ObservedAt.IsZero() {
		renewed = l.ObservedAt
	}
	d := time.Duration(l.DurationSecs) * time.Second
	if maxAge > 0 && (d <= 0 || maxAge < d) {
		d = maxAge
	}
	if d <= 0 {
		return time.Time{}, false
	}
	return renewed.Add(d), true
}

// RenewalRevives reports whether a Lease renewal seen at now should bring the node's pods
// back (re-run the reconciles of their registries): the renewal changed, and the node was,
// before it, lapsed or within margin of lapsing — a renewal seen just before the deadline
// may reach the operator after a reconcile at the deadline deregistered the pods.
func RenewalRevives(old, cur NodeLease, now time.Time, maxAge, margin time.Duration) bool {
	if cur.RenewTime.IsZero() || cur.RenewTime.Equal(old.RenewTime) {
		return false
	}
	expiry, ok := LeaseExpiry(old, maxAge)
	return ok && !now.Add(margin).Before(expiry)
}

// DeregistrationLag is how long after the change that made the pod ineligible its endpoint
// left the store (at now), measured only from a trigger Kubernetes records: the deletion
// request (deletionTimestamp minus the grace period) of a terminating pod, or the
// ContainersReady transition to False of a pod whose verdict is ContainersNotReady. Other
// deregistrations (node Lease lapsed, selector overlap, named port missing, phase changes)
// have no recorded trigger and are not measured (ok false): a fallback would measure the
// pod's age. The API records those times with one-second resolution (truncated), so the real
// trigger lies within the second after the recorded one: the lag returned is the lower bound,
// now minus (recorded + 1 s), at least 0 — a lag under a second reads 0 rather than up to
// 1 s too long, which would turn DrainSufficient False on an idle cluster.
func DeregistrationLag(pod *corev1.Pod, v Verdict, now time.Time) (time.Duration, bool) {
	var at time.Time
	switch {
	case pod.DeletionTimestamp != nil && v.Reason == v1beta1.ReasonPodTerminating:
		var grace int64
		if pod.DeletionGracePeriodSeconds != nil {
			grace = *pod.DeletionGracePeriodSeconds
		}
		at = pod.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
	case v.Reason == v1beta1.ReasonContainersNotReady:
		c := containersReady(pod)
		if c == nil || c.Status == corev1.ConditionTrue || c.LastTransitionTime.IsZero() {
			return 0, false
		}
		at = c.LastTransitionTime.Time
	default:
		return 0, false
	}
	return max(now.Sub(at.Add(time.Second)), 0), true
}

func containersReady(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.ContainersReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
