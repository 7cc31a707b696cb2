package controller

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
)

// publish hands the reconcile's verdicts (the ones that plan the store's writes) to the
// Publisher, once per reconcile: before the store write when the registry has no slow
// start (reconcilePublish), else before the readiness gates when the reconcile gets there
// (a gate may wait for the clients' ACKs), else where the status is computed, from the same
// scope. Its answer is reported in the XDSPublished condition (publishedCondition).
func (r *ServiceRegistryReconciler) publish(s *reconcileScope) {
	if r.Publisher == nil || s.published != nil {
		return
	}
	reg := publish.Registry{
		Key:     types.NamespacedName{Namespace: s.reg.Namespace, Name: s.reg.Name},
		UID:     s.reg.UID,
		Service: s.target.Service,
		Hold:    s.selErr != nil,
	}
	for _, p := range s.reg.Spec.Ports {
		reg.Ports = append(reg.Ports, p.Name)
	}
	reg.Pods = make([]publish.Pod, len(s.selected))
	now := r.Clock.Now()
	for i, p := range s.selected {
		reg.Pods[i] = publish.Pod{Name: p.pod.Name, State: p.verdict.State, Endpoint: p.endpoint}
		if p.verdict.State == v1beta1.EndpointRegistered {
			reg.Pods[i].Endpoint.Weight = xdsWeight(s, p.pod.Name, now)
		}
	}
	res := r.Publisher.Publish(reg)
	s.published = &res
}

// unpublish removes a deleted (or deleting) registry from the Publisher.
func (r *ServiceRegistryReconciler) unpublish(name types.NamespacedName) {
	if r.Publisher != nil {
		r.Publisher.Unpublish(name)
	}
}

// xdsGateWait reports whether the gate of a pod must stay False a little longer because an
// xDS client subscribed to the registry has not acknowledged the pod yet (only with
// XDSGateAckTimeout set and a Publisher that tracks ACKs).
func (r *ServiceRegistryReconciler) xdsGateWait(s *reconcileScope, pod string) (wait bool, clients int) {
	w, ok := r.Publisher.(publish.AckWaiter)
	if r.XDSGateAckTimeout <= 0 || !ok {
		return false, 0
	}
	done, n := w.Acknowledged(types.NamespacedName{Namespace: s.reg.Namespace, Name: s.reg.Name}, pod, r.XDSGateAckTimeout)
	return !done, n
}
