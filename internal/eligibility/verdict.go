package eligibility

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// LapsedLeaseRecheck is how often a registry with a pod on a lapsed node re-checks the
// node's Lease, besides the Lease event that normally brings the pod back: a registry whose
// every pod is on that node is never left waiting for an event that was missed.
const LapsedLeaseRecheck = 10 * time.Second

// Facts is everything the verdict on one pod of one registry depends on, gathered by the
// controller: the pod, the registry's warm-up, the older registry that owns the pod (if
// any), whether the registry's ports resolve on the pod, the pod's node Lease, and now.
type Facts struct {
	Pod            *corev1.Pod
	WarmupRequired bool
	// NameRefused is set when the registry may not publish under its service name (another
	// namespace owns it: internal/tenancy).
	NameRefused bool
	// OlderClaim names an older registry that writes the same keys and selects the pod.
	OlderClaim string
	// PortErr is set when a targetPort of the registry names no container port of the pod.
	PortErr error
	// NodeLease is the Lease of the pod's node (or its last state, and whether the Lease or
	// the Node was deleted or does not exist), nil when the node has no Lease or is not
	// checked: the pod is then judged by its own status.
	NodeLease *NodeLease
	// LeaseMaxAge caps how long after its last renewal a node counts as alive (see LeaseExpiry).
	LeaseMaxAge time.Duration
	// DeregistrationHeld is set when the node Lease guard holds this registered pod's removal
	// (internal/leaseguard: too many Leases lapsed at once to trust them): a pod whose node is
	// lost stays Registered, with reason DeregistrationHeld.
	DeregistrationHeld bool
	// SelectorUnusable is set when the registry's selector cannot be used (invalid or empty):
	// the pod is one of its own records, judged by every other rule, and a pod that would
	// warm up is not registered (Pending, InvalidSelector): no new pod is.
	SelectorUnusable bool
	Now              time.Time
}

// Decision is the verdict on a pod, and when to decide again if nothing else changes.
type Decision struct {
	Verdict
	// RecheckAt, when set, is when the verdict changes by itself (a node Lease lapsing) or
	// should be re-checked (a lapsed node's Lease).
	RecheckAt time.Time
}

// policy is one link of the verdict chain: it decides (true) or passes to the next.
type policy func(f Facts, d *Decision) bool

// chain is the one ordered verdict: the first policy that decides, decides. The order is
// the answer to "why is this pod not registered?": another namespace owns the registry's
// service name; another registry owns the pod; its containers
// are not serving; the registry's ports do not resolve on it; its node is lost; it still
// warms up (or failed to).
var chain = []policy{nameRefused, olderClaim, containers, ports, nodeLease, warmupGate}

// Decide gives the pod its verdict for one registry. It is pure; the clock is f.Now.
func Decide(f Facts) Decision {
	var d Decision
	for _, p := range chain {
		if p(f, &d) {
			return d
		}
	}
	d.Verdict = Verdict{v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady}
	return d
}

func nameRefused(f Facts, d *Decision) bool {
	if !f.NameRefused {
		return false
	}
	d.Verdict = Verdict{v1beta1.EndpointPending, v1beta1.ReasonServiceNameOwnedElsewhere}
	return true
}

func olderClaim(f Facts, d *Decision) bool {
	if f.OlderClaim == "" {
		return false
	}
	d.Verdict = Verdict{v1beta1.EndpointPending, v1beta1.ReasonSelectorOverlap}
	return true
}

func containers(f Facts, d *Decision) bool {
	v := classifyContainers(f.Pod)
	if v.Eligible() {
		return false
	}
	d.Verdict = v
	return true
}

func ports(f Facts, d *Decision) bool {
	if f.PortErr == nil {
		return false
	}
	d.Verdict = Verdict{v1beta1.EndpointPending, v1beta1.ReasonNamedPortMissing}
	return true
}

func nodeLease(f Facts, d *Decision) bool {
	if f.NodeLease == nil {
		return false
	}
	lost, recheck := NodeLost(*f.NodeLease, f.LeaseMaxAge, f.Now)
	d.RecheckAt = recheck
	if !lost {
		return false
	}
	d.Verdict = Verdict{v1beta1.EndpointUnready, v1beta1.ReasonNodeLeaseExpired}
	if f.DeregistrationHeld {
		d.Verdict = Verdict{v1beta1.EndpointRegistered, v1beta1.ReasonDeregistrationHeld}
	}
	return true
}

func warmupGate(f Facts, d *Decision) bool {
	if !HasGate(f.Pod) {
		return false
	}
	d.Verdict = gated(f.Pod, f.WarmupRequired)
	if f.SelectorUnusable && d.State == v1beta1.EndpointWarmingUp {
		d.Verdict = Verdict{v1beta1.EndpointPending, v1beta1.ReasonInvalidSelector}
	}
	return true
}
