package regstatus

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func TestUrgent(t *testing.T) {
	ready := metav1.Condition{Type: v1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonAllRegistered, Message: "3 of 3 registered"}
	stalled := metav1.Condition{Type: v1beta1.ConditionStalled, Status: metav1.ConditionFalse, Reason: v1beta1.ReasonSynced}
	base := v1beta1.ServiceRegistryStatus{ObservedGeneration: 2, Registered: 3, Conditions: []metav1.Condition{ready, stalled}}
	with := func(f func(*v1beta1.ServiceRegistryStatus)) v1beta1.ServiceRegistryStatus {
		st := *base.DeepCopy()
		f(&st)
		return st
	}
	cases := []struct {
		name string
		cur  v1beta1.ServiceRegistryStatus
		want bool
	}{
		{"same", with(func(*v1beta1.ServiceRegistryStatus) {}), false},
		{"counts and endpoints only", with(func(st *v1beta1.ServiceRegistryStatus) {
			st.Registered = 2
			st.Endpoints = []v1beta1.EndpointStatus{{Pod: "p-1", State: v1beta1.EndpointUnready}}
		}), false},
		{"a condition's message and time only", with(func(st *v1beta1.ServiceRegistryStatus) {
			st.Conditions[0].Message = "2 of 3 registered"
			st.Conditions[0].LastTransitionTime = metav1.Now()
		}), false},
		{"conditions in another order", with(func(st *v1beta1.ServiceRegistryStatus) {
			st.Conditions[0], st.Conditions[1] = st.Conditions[1], st.Conditions[0]
		}), false},
		{"drain advice only", with(func(st *v1beta1.ServiceRegistryStatus) {
			st.Drain = &v1beta1.DrainStatus{}
		}), false},
		{"new generation observed", with(func(st *v1beta1.ServiceRegistryStatus) { st.ObservedGeneration = 3 }), true},
		{"a condition's status", with(func(st *v1beta1.ServiceRegistryStatus) { st.Conditions[0].Status = metav1.ConditionFalse }), true},
		{"a condition's reason", with(func(st *v1beta1.ServiceRegistryStatus) { st.Conditions[1].Reason = v1beta1.ReasonStoreUnreachable }), true},
		{"a condition added", with(func(st *v1beta1.ServiceRegistryStatus) {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: v1beta1.ConditionDeregistrationHeld, Status: metav1.ConditionTrue})
		}), true},
		{"a condition removed", with(func(st *v1beta1.ServiceRegistryStatus) { st.Conditions = st.Conditions[:1] }), true},
		{"a condition replaced by another", with(func(st *v1beta1.ServiceRegistryStatus) {
			st.Conditions[1] = metav1.Condition{Type: v1beta1.ConditionDeregistrationHeld, Status: metav1.ConditionFalse, Reason: v1beta1.ReasonSynced}
		}), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Urgent(base, c.cur); got != c.want {
				t.Errorf("Urgent = %v, want %v", got, c.want)
			}
		})
	}
}
