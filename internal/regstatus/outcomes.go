package regstatus

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// StoreHealth is the self-monitoring verdict on a registry's stores (internal/monitor).
type StoreHealth struct {
	OK              bool
	Reason, Message string
}

// Hold is a node Lease guard hold: why (ReasonNodeLeasesLapsedInRegistry or ...InCluster) and
// what it kept.
type Hold struct {
	Reason, Message string
}

// Published is the xDS server's answer to a reconcile's verdicts (publish.Result).
type Published struct {
	OK bool
	// Reason is the False reason when not OK.
	Reason, Message string
}

// outcomeConditions reports what the reconcile's other parts did, as they told it: status.stores,
// StoreHealthy (self-monitoring), DeregistrationHeld (the node Lease guard) and XDSPublished
// (the xDS server). They come after the conditions Build derives, in that order.
func outcomeConditions(st *v1beta1.ServiceRegistryStatus, in Input) {
	st.Stores = in.Stores
	if h := in.StoreHealth; h != nil {
		status := metav1.ConditionFalse
		if h.OK {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: v1beta1.ConditionStoreHealthy, Status: status, Reason: h.Reason, Message: h.Message,
			ObservedGeneration: in.Generation, LastTransitionTime: metav1.NewTime(in.Now),
		})
	}
	if in.Hold == nil {
		removeCondition(&st.Conditions, v1beta1.ConditionDeregistrationHeld)
	} else {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: v1beta1.ConditionDeregistrationHeld, Status: metav1.ConditionTrue, Reason: in.Hold.Reason,
			Message: in.Hold.Message, ObservedGeneration: in.Generation, LastTransitionTime: metav1.NewTime(in.Now),
		})
	}
	if p := in.Published; p != nil {
		c := metav1.Condition{Type: v1beta1.ConditionXDSPublished, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonXDSPublished,
			Message: p.Message, ObservedGeneration: in.Generation}
		if !p.OK {
			c.Status, c.Reason = metav1.ConditionFalse, p.Reason
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
}
