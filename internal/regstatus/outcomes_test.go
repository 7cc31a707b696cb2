package regstatus

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// The conditions reporting what the reconcile's other parts did (self-monitoring, the node
// Lease guard, the xDS server) and status.stores come from Build too, on the selector-error
// path as well, after the conditions Build derives.
func TestBuildOutcomes(t *testing.T) {
	held := metav1.Condition{Type: v1beta1.ConditionDeregistrationHeld, Status: metav1.ConditionTrue,
		Reason: v1beta1.ReasonNodeLeasesLapsedInCluster, Message: "held", ObservedGeneration: oldGen, LastTransitionTime: metav1.NewTime(t0)}
	healthy := metav1.Condition{Type: v1beta1.ConditionStoreHealthy, Status: metav1.ConditionTrue,
		Reason: "Healthy", Message: "ok", ObservedGeneration: oldGen, LastTransitionTime: metav1.NewTime(t0)}
	stores := []v1beta1.StoreStatus{{Name: "a", Registered: 1, Synced: true}, {Name: "b", Message: "down"}}
	type want struct {
		present bool
		status  metav1.ConditionStatus
		reason  string
		since   metav1.Time
	}
	for _, tc := range []struct {
		name     string
		old      []metav1.Condition
		in       Input
		selErr   bool
		health   want
		hold     want
		xds      want
		toStores []v1beta1.StoreStatus
	}{
		{name: "nothing reported: health kept, hold removed, no xDS condition", old: []metav1.Condition{held, healthy},
			health: want{true, metav1.ConditionTrue, "Healthy", metav1.NewTime(t0)}},
		{name: "store unhealthy, hold comes, xDS refused",
			in: Input{StoreHealth: &StoreHealth{Reason: "CanaryStale", Message: "stale"},
				Hold:      &Hold{Reason: v1beta1.ReasonNodeLeasesLapsedInRegistry, Message: "kept 3"},
				Published: &Published{Reason: "NoPorts", Message: "no ports"}, Stores: stores},
			health: want{true, metav1.ConditionFalse, "CanaryStale", metav1.NewTime(now)},
			hold:   want{true, metav1.ConditionTrue, v1beta1.ReasonNodeLeasesLapsedInRegistry, metav1.NewTime(now)},
			xds:    want{true, metav1.ConditionFalse, "NoPorts", metav1.Time{}}, toStores: stores},
		{name: "hold goes on, its transition time kept", old: []metav1.Condition{held},
			in:   Input{Hold: &Hold{Reason: v1beta1.ReasonNodeLeasesLapsedInCluster, Message: "kept 4"}, Published: &Published{OK: true}},
			hold: want{true, metav1.ConditionTrue, v1beta1.ReasonNodeLeasesLapsedInCluster, metav1.NewTime(t0)},
			xds:  want{true, metav1.ConditionTrue, v1beta1.ReasonXDSPublished, metav1.Time{}}},
		{name: "selector error path too", selErr: true, old: []metav1.Condition{held},
			in:     Input{StoreHealth: &StoreHealth{OK: true, Reason: "Healthy"}, Stores: stores},
			health: want{true, metav1.ConditionTrue, "Healthy", metav1.NewTime(now)}, toStores: stores},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Generation, in.ServiceName, in.StoreName, in.Now = gen, "web", storeName, now
			if tc.selErr {
				in.SelectorErr = errStore
			}
			st := Build(v1beta1.ServiceRegistryStatus{Conditions: tc.old}, in)
			for _, c := range []struct {
				typ string
				w   want
			}{{v1beta1.ConditionStoreHealthy, tc.health}, {v1beta1.ConditionDeregistrationHeld, tc.hold}, {v1beta1.ConditionXDSPublished, tc.xds}} {
				got := meta.FindStatusCondition(st.Conditions, c.typ)
				if (got != nil) != c.w.present {
					t.Fatalf("%s present %v, want %v: %+v", c.typ, got != nil, c.w.present, st.Conditions)
				}
				if got == nil {
					continue
				}
				if got.Status != c.w.status || got.Reason != c.w.reason {
					t.Errorf("%s = %s/%s, want %s/%s", c.typ, got.Status, got.Reason, c.w.status, c.w.reason)
				}
				if !c.w.since.IsZero() && !got.LastTransitionTime.Equal(&c.w.since) {
					t.Errorf("%s since %v, want %v", c.typ, got.LastTransitionTime, c.w.since)
				}
				if c.typ != v1beta1.ConditionStoreHealthy || tc.in.StoreHealth != nil {
					if got.ObservedGeneration != gen {
						t.Errorf("%s observedGeneration %d, want %d", c.typ, got.ObservedGeneration, gen)
					}
				}
			}
			if len(st.Stores) != len(tc.toStores) {
				t.Errorf("status.stores = %+v, want %+v", st.Stores, tc.toStores)
			}
		})
	}
}
