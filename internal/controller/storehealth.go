package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/monitor"
)

// StoreHealthSource gives the self-monitoring verdict on the named stores (all monitored
// stores when names is empty): a monitor.Set in production.
type StoreHealthSource interface {
	Verdict(names []string) monitor.Verdict
}

// storeHealthCondition sets StoreHealthy from r.StoreHealth on the stores the registry
// publishes to; it leaves the condition as it was while the verdict is unknown, and sets
// nothing without a source.
func (r *ServiceRegistryReconciler) storeHealthCondition(s *reconcileScope) {
	if r.StoreHealth == nil {
		return
	}
	var names []string
	for _, res := range s.stores {
		names = append(names, res.Name)
	}
	v := r.StoreHealth.Verdict(names)
	if !v.Known {
		return
	}
	status := metav1.ConditionFalse
	if v.OK {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.reg.Status.Conditions, metav1.Condition{
		Type: v1beta1.ConditionStoreHealthy, Status: status, Reason: v.Reason, Message: v.Message,
		ObservedGeneration: s.reg.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now()),
	})
}
