package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/claimindex"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

// The gate phase of a reconcile: after the store acknowledged the endpoints, each gated
// pod's registrar.dev/ready condition is set to what its verdict and the store call for.

// flipGates writes the gate condition every gated pod of the scope should carry now. It runs
// after the store write, so a gate turns True only for an endpoint the store acknowledged.
func (r *ServiceRegistryReconciler) flipGates(ctx context.Context, s *reconcileScope) error {
	r.acks.set(s.reg.UID, s.stored)
	for _, p := range s.selected {
		rec, stored := s.stored[p.pod.Name]
		want, ok := eligibility.GateFor(p.pod, p.verdict, stored && rec.UID == string(p.pod.UID))
		if !ok {
			continue
		}
		msg := fmt.Sprintf("set by registrar: %s", want.Reason)
		if want.Status == corev1.ConditionTrue {
			claimants, err := claimindex.Claimants(ctx, r.Client, s.reg.Namespace, p.pod.Labels)
			if err != nil {
				return err
			}
			if waits := r.gateWaitsFor(s, p.pod, want, claimants); waits != "" {
				log.FromContext(ctx).V(1).Info("gate stays False: another registry selecting the pod is not done",
					"pod", p.pod.Name, "waitingFor", waits)
				continue
			}
			if wait, n := r.xdsGateWait(s, p.pod.Name); wait {
				log.FromContext(ctx).V(1).Info("gate stays False: xDS clients have not acknowledged the pod yet",
					"pod", p.pod.Name, "clients", n)
				s.xdsGateWait = true
				continue
			}
			msg = fmt.Sprintf("endpoint %s is in the store (service %s)", rec.Address, s.target.Service)
		}
		err := r.setGate(ctx, p.pod, want.Status, want.Reason, msg, p.pod.ResourceVersion)
		if apierrors.IsConflict(err) {
			continue // decided on a stale pod; its newer version is on its way to a reconcile
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// gateWaitsFor names a registry selecting the pod (this one included) that the pod's gate
// still waits for before turning True, or "" (see eligibility.GateWaitsFor). This registry
// counts as holding the endpoint (its caller checked), the others by their last reconcile.
func (r *ServiceRegistryReconciler) gateWaitsFor(s *reconcileScope, pod *corev1.Pod, want eligibility.GateWant, claimants []eligibility.Claimant) string {
	holders := eligibility.GateHolders(labels.Set(pod.Labels), claimants)
	cur := ""
	if c := eligibility.GateCondition(pod); c != nil {
		cur = c.Reason
	}
	self := string(s.reg.UID)
	return eligibility.GateWaitsFor(want, cur, holders, func(uid string) bool {
		return uid == self || r.acks.has(types.UID(uid), pod.Name, pod.UID)
	})
}

// setGate patches the pod's registrar.dev/ready condition (pods/status, strategic merge on
// the condition type), guarded by the pod's UID so a recreated pod is never touched, and,
// when resourceVersion is set, by the version the decision was made on: a reconcile working
// from a stale cache then fails with a conflict instead of overwriting a newer outcome (a
// warm-up result written meanwhile).
func (r *ServiceRegistryReconciler) setGate(ctx context.Context, pod *corev1.Pod, status corev1.ConditionStatus, reason, msg, resourceVersion string) error {
	guard := map[string]any{"uid": pod.UID}
	if resourceVersion != "" {
		guard["resourceVersion"] = resourceVersion
	}
	patch := map[string]any{
		"metadata": guard,
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: v1beta1.ReadinessGate, Status: status, Reason: reason, Message: msg,
			LastTransitionTime: metav1.NewTime(r.Clock.Now()),
		}}},
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode gate patch: %w", err)
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := r.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, raw)); err != nil {
		return fmt.Errorf("set %s=%s (%s) on pod %s/%s: %w", v1beta1.ReadinessGate, status, reason, pod.Namespace, pod.Name, err)
	}
	return nil
}
