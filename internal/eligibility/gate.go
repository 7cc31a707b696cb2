package eligibility

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Claimant is what the gate and overlap decisions need to know of one ServiceRegistry (or
// of the registry an annotated Deployment is about to get).
type Claimant struct {
	Name    string
	UID     string
	Created time.Time
	// Selector is nil when the registry's selector is invalid or empty: it selects nothing.
	Selector labels.Selector
	// Deleting is set once the registry has a deletionTimestamp: it manages no pod any more.
	Deleting bool
	// Warmup is set when the registry warms its pods up before registering them.
	Warmup bool
	// Service and Stores are where it publishes (Stores empty: the default store).
	Service string
	Stores  []string
}

// ClaimantOf describes a ServiceRegistry.
func ClaimantOf(reg *v1beta1.ServiceRegistry) Claimant {
	return ClaimantWith(reg, func(reg *v1beta1.ServiceRegistry) (labels.Selector, error) {
		return metav1.LabelSelectorAsSelector(&reg.Spec.Selector)
	})
}

// ClaimantWith is ClaimantOf with the registry's selector parsed by parse, which must answer
// as metav1.LabelSelectorAsSelector does (e.g. remembered: selindex.Parsed).
func ClaimantWith(reg *v1beta1.ServiceRegistry, parse func(*v1beta1.ServiceRegistry) (labels.Selector, error)) Claimant {
	c := Claimant{
		Name: reg.Name, UID: string(reg.UID), Created: reg.CreationTimestamp.Time,
		Deleting: reg.DeletionTimestamp != nil, Warmup: reg.Spec.Warmup != nil,
		Service: reg.ResolvedServiceName(), Stores: reg.Spec.Stores,
	}
	if sel, err := parse(reg); err == nil && !sel.Empty() {
		c.Selector = sel
	}
	return c
}

// Selects reports whether the registry manages a pod with these labels: it is not being
// deleted and its (valid, non-empty) selector matches.
func (c Claimant) Selects(podLabels labels.Set) bool {
	return !c.Deleting && c.Selector != nil && c.Selector.Matches(podLabels)
}

// OlderThan is the one "oldest registry first" order, shared by the webhook (which injects
// for the oldest registry) and the controller (where the oldest registry of a service owns
// a pod both select): creationTimestamp, then name.
func OlderThan(a, b Claimant) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.Name < b.Name
}

// SortOldestFirst orders claimants oldest first.
func SortOldestFirst(cs []Claimant) {
	sort.SliceStable(cs, func(i, j int) bool { return OlderThan(cs[i], cs[j]) })
}

// SharesStore reports whether two registries publishing the same service write to at least
// one common store (an empty list is the default store only).
func SharesStore(a, b Claimant) bool {
	as, bs := a.Stores, b.Stores
	if len(as) == 0 {
		as = []string{""}
	}
	if len(bs) == 0 {
		bs = []string{""}
	}
	for _, x := range as {
		for _, y := range bs {
			if x == y {
				return true
			}
		}
	}
	return false
}

// Overlaps reports whether older writes the same keys as c: same service, a common store.
// (Claimants come from one namespace.)
func Overlaps(older, c Claimant) bool {
	return older.UID != c.UID && older.Service == c.Service && SharesStore(older, c) && OlderThan(older, c)
}

// GateHolders returns the registries that decide a pod's gate: those that select it, minus
// any that yields the pod to an older registry writing the same keys (that one decides for
// both). Empty means no registry manages the pod: its gate is to be released.
func GateHolders(podLabels labels.Set, cs []Claimant) []Claimant {
	var selecting []Claimant
	for _, c := range cs {
		if c.Selects(podLabels) {
			selecting = append(selecting, c)
		}
	}
	SortOldestFirst(selecting)
	var out []Claimant
	for _, c := range selecting {
		yields := false
		for _, o := range out {
			if Overlaps(o, c) {
				yields = true
				break
			}
		}
		if !yields {
			out = append(out, c)
		}
	}
	return out
}

// ReleaseGrace is how old a gated pod no registry manages must be before its gate is
// released: a pod's admission (which injected the gate for a registry) and the operator's
// view of that registry arrive through different watches, in either order.
const ReleaseGrace = 5 * time.Second

// ReleaseAt says whether a gated pod's gate is to be released: when no registry manages it
// and its gate is not True, at created+ReleaseGrace (release now when that is not after now).
func ReleaseAt(hasGate, gateTrue, terminating bool, holders int, created time.Time) (time.Time, bool) {
	if !hasGate || gateTrue || terminating || holders > 0 {
		return time.Time{}, false
	}
	return created.Add(ReleaseGrace), true
}

// GateWaitsFor returns the first registry among holders that the gate of a pod still waits
// for before it may turn True, or "" when none: a registry that asks for a warm-up while the
// pod's gate does not record a finished one (reason WarmedUp), or one whose store has not
// acknowledged the pod's endpoint (stored reports that, by registry UID). The gate means:
// every registry that selects the pod has warmed it up where asked, and holds its endpoint.
func GateWaitsFor(gate GateWant, cur string, holders []Claimant, stored func(uid string) bool) string {
	if gate.Status != "True" {
		return ""
	}
	for _, h := range holders {
		if h.Warmup && cur != v1beta1.GateWarmedUp {
			return h.Name
		}
		if !stored(h.UID) {
			return h.Name
		}
	}
	return ""
}
