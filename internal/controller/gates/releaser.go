// Package gates owns registrar's readiness gate (registrar.dev/ready): the one writer of the
// condition (Writer.Set, guarded by the pod's UID and the version decided on), the gate phase
// of a ServiceRegistry reconcile (Writer.Flip: a gate turns True only for an endpoint every
// store of every registry selecting the pod acknowledged, and after the xDS clients' ACKs when
// asked), the registries' acknowledgements that phase shares (Acks), and the gate releaser
// (Releaser: a pod no registry manages any more is released rather than left unready).
package gates

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/claimindex"
	"github.com/registrar-dev/registrar/internal/controller/ctrlrt"
	"github.com/registrar-dev/registrar/internal/echo"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/selindex"
)

// Releaser is a pod-level reconciler for gated pods whose gate is not True: when no
// ServiceRegistry manages such a pod any more (its registry was deleted or is being deleted,
// stopped selecting it, or its Deployment's annotations were removed before the gate
// flipped), nothing else would ever set the gate, the pod would never become Ready and its
// rollout would stall. It sets the gate True with reason Released, a message saying why, and
// an Event. A pod some registry manages is left to that registry's reconcile.
type Releaser struct {
	client.Client
	Recorder recorder.EventRecorder
	Clock    clock.PassiveClock
	// SetGate sets the readiness gate condition of a pod (the reconciler's: one writer of it).
	SetGate func(ctx context.Context, pod *corev1.Pod, status corev1.ConditionStatus, reason, msg, resourceVersion string) error
	// Index, when set, finds a registry's pods without reading the namespace's.
	Index *selindex.Index
	// Versions shares StatusOnly's answers with the reconciler's handlers.
	Versions *echo.Statuses
}

// waitingGate passes pods that carry the gate, not True, and are not terminating.
func waitingGate(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.DeletionTimestamp != nil || !eligibility.HasGate(pod) {
		return false
	}
	c := eligibility.GateCondition(pod)
	return c == nil || c.Status != corev1.ConditionTrue
}

// SetupWithManager registers the releaser with mgr, limited to shards when set.
func (g *Releaser) SetupWithManager(mgr ctrl.Manager, shards ctrlrt.Shards) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("gaterelease").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(waitingGate))).
		Watches(&v1beta1.ServiceRegistry{}, handler.EnqueueRequestsFromMapFunc(g.waitingPodsOf),
			builder.WithPredicates(ctrlrt.NotStatusOnly(g.Versions))).
		WithOptions(ctrlrt.ShardedOptions(controller.Options{}, shards, listWaitingPods(mgr.GetClient()))).
		Complete(ctrlrt.Sharded(g, shards))
}

// waitingPodsOf maps a ServiceRegistry event (old and new object) to the waiting gated pods
// of its namespace that its selector matches: those it may have just stopped managing.
func (g *Releaser) waitingPodsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	reg, ok := obj.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil
	}
	c := eligibility.ClaimantOf(reg)
	if c.Selector == nil {
		return nil
	}
	var reqs []reconcile.Request
	if g.Index != nil {
		for _, name := range g.Index.Matching(reg.Namespace, &reg.Spec.Selector) {
			pod := &corev1.Pod{}
			key := types.NamespacedName{Namespace: reg.Namespace, Name: name}
			if err := g.Get(ctx, key, pod, client.UnsafeDisableDeepCopy); err == nil && waitingGate(pod) {
				reqs = append(reqs, reconcile.Request{NamespacedName: key})
			}
		}
		return reqs
	}
	var pods corev1.PodList
	if err := g.List(ctx, &pods, client.InNamespace(reg.Namespace), client.MatchingLabelsSelector{Selector: c.Selector},
		client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list pods of a ServiceRegistry", "serviceRegistry", client.ObjectKeyFromObject(reg))
		return nil
	}
	for i := range pods.Items {
		if waitingGate(&pods.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
		}
	}
	return reqs
}

// Reconcile releases the gate of one pod if no registry manages it.
func (g *Releaser) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := g.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	claimants, err := claimindex.Claimants(ctx, g.Client, pod.Namespace, pod.Labels)
	if err != nil {
		return ctrl.Result{}, err
	}
	holders := eligibility.GateHolders(labels.Set(pod.Labels), claimants)
	gate := eligibility.GateCondition(pod)
	at, release := eligibility.ReleaseAt(eligibility.HasGate(pod), gate != nil && gate.Status == corev1.ConditionTrue,
		pod.DeletionTimestamp != nil, len(holders), pod.CreationTimestamp.Time)
	if !release {
		return ctrl.Result{}, nil
	}
	if wait := at.Sub(g.Clock.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	msg := fmt.Sprintf("released by registrar: no ServiceRegistry manages this pod (%s); the pod becomes Ready without being registered",
		unmanagedWhy(pod, claimants))
	err = g.SetGate(ctx, pod, corev1.ConditionTrue, v1beta1.GateReleased, msg, pod.ResourceVersion)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil // a newer version of the pod is on its way here
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	metrics.GatesReleased.Inc()
	g.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, v1beta1.EventGateReleased, "ReleaseGate", "%s", msg)
	log.FromContext(ctx).Info("released the gate of an unmanaged pod", "pod", req.NamespacedName, "why", msg)
	return ctrl.Result{}, nil
}

// unmanagedWhy says, for the gate message, why no registry manages the pod.
func unmanagedWhy(pod *corev1.Pod, cs []eligibility.Claimant) string {
	var deleting []string
	for _, c := range cs {
		if c.Deleting && c.Selector != nil && c.Selector.Matches(labels.Set(pod.Labels)) {
			deleting = append(deleting, c.Name)
		}
	}
	if len(deleting) > 0 {
		return fmt.Sprintf("ServiceRegistry %s is being deleted", strings.Join(deleting, ", "))
	}
	return fmt.Sprintf("no ServiceRegistry in namespace %s selects its labels any more", pod.Namespace)
}

// listWaitingPods are requests for every pod whose readiness gate waits.
func listWaitingPods(c client.Reader) func(ctx context.Context) ([]reconcile.Request, error) {
	return func(ctx context.Context) ([]reconcile.Request, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		var out []reconcile.Request
		for i := range pods.Items {
			if waitingGate(&pods.Items[i]) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
			}
		}
		return out, nil
	}
}
