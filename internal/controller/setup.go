package controller

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/backoff"
)

// Options tune the controller.
type Options struct {
	// MaxConcurrentReconciles is how many registries sync at once.
	MaxConcurrentReconciles int
	// RetryBase and RetryMax bound the exponential, jittered retry of a failing registry.
	RetryBase, RetryMax time.Duration
	// StatusWorkers is how many ServiceRegistry statuses are written at once (2 when zero).
	StatusWorkers int
	// MaxConcurrentWarmups bounds the pods warmed up at once, across all registries.
	MaxConcurrentWarmups int
	// StoreRecovered, when set, enqueues every ServiceRegistry on each event, e.g. when the
	// store answers again after an outage, so that none waits out its retry backoff.
	StoreRecovered <-chan event.GenericEvent
	// ResyncInterval is the period (jittered) of the full re-read of every store scope
	// against what the reconciler knows, the backstop of the stores' watches;
	// DefaultResyncInterval when zero.
	ResyncInterval time.Duration
	// Shards, when set (--sharding=lease), limits every controller to this replica's shards.
	Shards Shards
}

// SetupWithManager registers the reconciler: it watches ServiceRegistries and Pods, a pod
// event enqueuing the registries of its namespace whose selector matches the pod.
func (r *ServiceRegistryReconciler) SetupWithManager(mgr ctrl.Manager, opts Options) error {
	r.known = newKnownRecords()
	r.acks = newGateAcks()
	r.leasesSeen = newLeaseObservations()
	r.owners = newOwnerIndex()
	r.warmups = newWarmupTracker(max(opts.MaxConcurrentWarmups, 1))
	if err := mgr.Add(r.warmups); err != nil {
		return fmt.Errorf("add warm-up tracker: %w", err)
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = 200 * time.Millisecond
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 30 * time.Second
	}
	if opts.StatusWorkers <= 0 {
		opts.StatusWorkers = 2
	}
	r.status = newStatusWriter(mgr.GetClient(), opts.StatusWorkers, opts.RetryBase, opts.RetryMax)
	if err := mgr.Add(r.status); err != nil {
		return fmt.Errorf("add status writer: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podNodeNameField,
		func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	releaser := &gateReleaser{Client: mgr.GetClient(), Recorder: r.Recorder, Clock: r.Clock, setGate: r.setGate}
	if err := releaser.setup(mgr, opts.Shards); err != nil {
		return fmt.Errorf("set up the gate releaser: %w", err)
	}
	if opts.ResyncInterval <= 0 {
		opts.ResyncInterval = DefaultResyncInterval
	}
	if opts.Shards != nil {
		opts.Shards.OnRelease(r.known.forgetNamespaces)
	}
	repairs := make(chan event.GenericEvent, 256)
	if err := mgr.Add(&antiEntropy{r: r, interval: opts.ResyncInterval, enqueue: repairs}); err != nil {
		return fmt.Errorf("add store anti-entropy: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ServiceRegistry{}, builder.WithPredicates(inShards(opts.Shards))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.registriesForPod), builder.WithPredicates(inShards(opts.Shards))).
		Watches(&v1alpha1.ServiceRegistry{}, handler.EnqueueRequestsFromMapFunc(r.registriesOfService))
	if r.NodeLeaseTimeout > 0 {
		b = b.Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.registriesForLease),
			builder.WithPredicates(r.leaseRenewedAfterLapse()))
	}
	b = b.WatchesRawSource(source.Channel(repairs, &handler.EnqueueRequestForObject{}))
	if opts.StoreRecovered != nil {
		b = b.WatchesRawSource(source.Channel(opts.StoreRecovered, handler.EnqueueRequestsFromMapFunc(r.allRegistries)))
	}
	return b.
		WithOptions(shardedOptions(controller.Options{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			RateLimiter:             backoff.New[reconcile.Request](opts.RetryBase, opts.RetryMax, 0.2),
		}, opts.Shards, listRegistries(mgr.GetClient()))).
		Named("serviceregistry").
		Complete(sharded(r, opts.Shards))
}

// registriesForPod maps a pod to the ServiceRegistries of its namespace that select it.
// controller-runtime calls it with both the old and the new pod of an update, so a pod
// whose labels stop matching still reaches the registry it left.
func (r *ServiceRegistryReconciler) registriesForPod(ctx context.Context, pod client.Object) []reconcile.Request {
	var regs v1alpha1.ServiceRegistryList
	// Read-only (selectors and names), and called twice per pod update: no deep copies.
	if err := r.List(ctx, &regs, client.InNamespace(pod.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list ServiceRegistries for pod", "pod", client.ObjectKeyFromObject(pod))
		return nil
	}
	var reqs []reconcile.Request
	podLabels := labels.Set(pod.GetLabels())
	for i := range regs.Items {
		if selectsPod(&regs.Items[i].Spec.Selector, podLabels) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&regs.Items[i])})
		}
	}
	return reqs
}

// allRegistries maps any event to every ServiceRegistry, forgetting the records it knew of
// them: the store may have changed behind the operator's back (an expired endpoint lease).
func (r *ServiceRegistryReconciler) allRegistries(ctx context.Context, _ client.Object) []reconcile.Request {
	var regs v1alpha1.ServiceRegistryList
	if err := r.List(ctx, &regs); err != nil {
		log.FromContext(ctx).Error(err, "list ServiceRegistries")
		return nil
	}
	reqs := make([]reconcile.Request, len(regs.Items))
	for i := range regs.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&regs.Items[i])}
		r.known.forget(reqs[i].NamespacedName)
	}
	return reqs
}

// selectsPod reports whether a registry's selector matches a pod's labels; an empty or
// invalid selector matches nothing. Plain matchLabels, the common case, is compared directly
// rather than building a labels.Selector for every registry of the namespace, twice per pod
// event (docs/development.md, "Benchmark history").
func selectsPod(ls *metav1.LabelSelector, podLabels labels.Set) bool {
	if len(ls.MatchExpressions) > 0 {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		return err == nil && !sel.Empty() && sel.Matches(podLabels)
	}
	if len(ls.MatchLabels) == 0 {
		return false
	}
	for k, v := range ls.MatchLabels {
		if got, ok := podLabels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
