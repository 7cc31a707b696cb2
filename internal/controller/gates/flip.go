package gates

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/claimindex"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/store"
)

// Writer writes the readiness gate condition of pods: the only writer of it (the gate phase
// and the releaser both write through Set).
type Writer struct {
	// Client patches pods/status and reads the claimants of a pod (claimindex).
	Client client.Client
	Clock  clock.PassiveClock
	// Acks are the registries' acknowledgements (a gate selected by several registries waits
	// for each).
	Acks *Acks
}

// Pods are a reconcile's selected pods with their verdicts.
type Pods interface {
	All(yield func(*corev1.Pod, eligibility.Verdict) bool)
}

// Flip is one reconcile's gate phase: the registry, its selected pods and what its stores hold.
type Flip struct {
	Registry *v1beta1.ServiceRegistry
	// Service is the registry's service name (for the gate message).
	Service string
	Pods    Pods
	// Stored are the registry's own records every store holds (nil: unknown).
	Stored map[string]store.Record
	// XDSWait reports whether a pod's gate waits for its xDS clients' ACKs, and how many
	// clients; nil never waits.
	XDSWait func(pod string) (wait bool, clients int)
}

// Flip writes the gate condition every gated pod of the registry should carry now. It runs
// after the store write, so a gate turns True only for an endpoint the store acknowledged.
// xdsWait is true when some gate stays False until xDS clients acknowledge its pod.
func (g *Writer) Flip(ctx context.Context, f Flip) (xdsWait bool, err error) {
	g.Acks.Set(f.Registry.UID, f.Stored)
	f.Pods.All(func(pod *corev1.Pod, verdict eligibility.Verdict) bool {
		rec, stored := f.Stored[pod.Name]
		want, ok := eligibility.GateFor(pod, verdict, stored && rec.UID == string(pod.UID))
		if !ok {
			return true
		}
		msg := fmt.Sprintf("set by registrar: %s", want.Reason)
		if want.Status == corev1.ConditionTrue {
			claimants, cerr := claimindex.Claimants(ctx, g.Client, f.Registry.Namespace, pod.Labels)
			if cerr != nil {
				err = cerr
				return false
			}
			if waits := g.waitsFor(f.Registry, pod, want, claimants); waits != "" {
				log.FromContext(ctx).V(1).Info("gate stays False: another registry selecting the pod is not done",
					"pod", pod.Name, "waitingFor", waits)
				return true
			}
			if f.XDSWait != nil {
				if wait, n := f.XDSWait(pod.Name); wait {
					log.FromContext(ctx).V(1).Info("gate stays False: xDS clients have not acknowledged the pod yet",
						"pod", pod.Name, "clients", n)
					xdsWait = true
					return true
				}
			}
			msg = fmt.Sprintf("endpoint %s is in the store (service %s)", rec.Address, f.Service)
		}
		serr := g.Set(ctx, pod, want.Status, want.Reason, msg, pod.ResourceVersion)
		if apierrors.IsConflict(serr) {
			return true // decided on a stale pod; its newer version is on its way to a reconcile
		}
		if serr != nil {
			err = serr
			return false
		}
		return true
	})
	return xdsWait, err
}

// waitsFor names a registry selecting the pod (this one included) that the pod's gate
// still waits for before turning True, or "" (see eligibility.GateWaitsFor). This registry
// counts as holding the endpoint (its caller checked), the others by their last reconcile.
func (g *Writer) waitsFor(reg *v1beta1.ServiceRegistry, pod *corev1.Pod, want eligibility.GateWant, claimants []eligibility.Claimant) string {
	holders := eligibility.GateHolders(labels.Set(pod.Labels), claimants)
	cur := ""
	if c := eligibility.GateCondition(pod); c != nil {
		cur = c.Reason
	}
	self := string(reg.UID)
	return eligibility.GateWaitsFor(want, cur, holders, func(uid string) bool {
		return uid == self || g.Acks.Has(types.UID(uid), pod.Name, pod.UID)
	})
}

// Set patches the pod's registrar.dev/ready condition (pods/status, strategic merge on
// the condition type), guarded by the pod's UID so a recreated pod is never touched, and,
// when resourceVersion is set, by the version the decision was made on: a reconcile working
// from a stale cache then fails with a conflict instead of overwriting a newer outcome (a
// warm-up result written meanwhile).
func (g *Writer) Set(ctx context.Context, pod *corev1.Pod, status corev1.ConditionStatus, reason, msg, resourceVersion string) error {
	guard := map[string]any{"uid": pod.UID}
	if resourceVersion != "" {
		guard["resourceVersion"] = resourceVersion
	}
	patch := map[string]any{
		"metadata": guard,
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: v1beta1.ReadinessGate, Status: status, Reason: reason, Message: msg,
			LastTransitionTime: metav1.NewTime(g.Clock.Now()),
		}}},
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode gate patch: %w", err)
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := g.Client.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, raw)); err != nil {
		return fmt.Errorf("set %s=%s (%s) on pod %s/%s: %w", v1beta1.ReadinessGate, status, reason, pod.Namespace, pod.Name, err)
	}
	return nil
}
