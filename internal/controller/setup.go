package controller

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/backoff"
	"github.com/registrar-dev/registrar/internal/claimindex"
	"github.com/registrar-dev/registrar/internal/controller/ctrlrt"
	"github.com/registrar-dev/registrar/internal/controller/enqueue"
	"github.com/registrar-dev/registrar/internal/controller/gates"
	"github.com/registrar-dev/registrar/internal/controller/nodeliveness"
	"github.com/registrar-dev/registrar/internal/controller/regcache"
	"github.com/registrar-dev/registrar/internal/controller/report"
	"github.com/registrar-dev/registrar/internal/controller/statuswriter"
	"github.com/registrar-dev/registrar/internal/controller/storesync"
	"github.com/registrar-dev/registrar/internal/selindex"
	"github.com/registrar-dev/registrar/internal/warmup"
)

const (
	// DefaultStatusWriteInterval is the default of --status-write-interval.
	DefaultStatusWriteInterval = time.Second
	// DefaultStatusWritesQPS is the default of --status-writes-qps.
	DefaultStatusWritesQPS = 10
	// DefaultResyncInterval is the period of the full re-read when Options.ResyncInterval is zero.
	DefaultResyncInterval = 5 * time.Minute
)

// Options tune the controller.
type Options struct {
	// MaxConcurrentReconciles is how many registries sync at once.
	MaxConcurrentReconciles int
	// RetryBase and RetryMax bound the exponential, jittered retry of a failing registry.
	RetryBase, RetryMax time.Duration
	// StatusWorkers is how many ServiceRegistry statuses are written at once (2 when zero).
	StatusWorkers int
	// StatusWriteInterval is the least time between two status writes of one registry that
	// only refine its conditions (counts, status.endpoints, messages); a change of a
	// condition or of observedGeneration is written at once. DefaultStatusWriteInterval when
	// zero; negative writes every change at once.
	StatusWriteInterval time.Duration
	// StatusWritesQPS is the operator-wide budget of those paced writes, per second (its
	// burst is the same number of writes): beyond it they wait their turn; urgent writes
	// never wait. DefaultStatusWritesQPS when zero; negative is no budget.
	StatusWritesQPS float64
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
	Shards ctrlrt.Shards
}

// SetupWithManager registers the reconciler: it watches ServiceRegistries and Pods, a pod
// event enqueuing the registries of its namespace whose selector matches the pod.
func (r *ServiceRegistryReconciler) SetupWithManager(mgr ctrl.Manager, opts Options) error {
	r.index = selindex.New()
	r.components(mgr.GetClient())
	r.triggers = ctrlrt.NewTriggers()
	r.warmups = warmup.NewTracker(max(opts.MaxConcurrentWarmups, 1))
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
	if opts.StatusWriteInterval == 0 {
		opts.StatusWriteInterval = DefaultStatusWriteInterval
	}
	if opts.StatusWritesQPS == 0 {
		opts.StatusWritesQPS = DefaultStatusWritesQPS
	}
	r.status = statuswriter.New(mgr.GetClient(), statuswriter.Config{
		Workers: opts.StatusWorkers, RetryBase: opts.RetryBase, RetryMax: opts.RetryMax,
		Interval: opts.StatusWriteInterval,
		QPS:      opts.StatusWritesQPS, Burst: int(math.Ceil(opts.StatusWritesQPS)),
	})
	if err := mgr.Add(r.status); err != nil {
		return fmt.Errorf("add status writer: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, nodeliveness.PodNodeNameField,
		func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	if err := r.cache.Setup(context.Background(), mgr); err != nil {
		return err
	}
	// The gate releaser and the gate phase read the claimants of a pod through this index,
	// not the namespace's registries and Deployments (the webhook registers it too, once).
	if err := claimindex.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	releaser := &gates.Releaser{Client: mgr.GetClient(), Recorder: r.Recorder, Clock: r.Clock, SetGate: r.gates.Set, Index: r.index, Versions: r.status.Echoes()}
	if err := releaser.SetupWithManager(mgr, opts.Shards); err != nil {
		return fmt.Errorf("set up the gate releaser: %w", err)
	}
	if opts.ResyncInterval <= 0 {
		opts.ResyncInterval = DefaultResyncInterval
	}
	if opts.Shards != nil {
		opts.Shards.OnRelease(r.syncer.ForgetNamespaces)
	}
	storeEvents := enqueue.NewStoreEvents(r.triggers)
	if err := mgr.Add(storeEvents.AntiEntropy(r.syncer, r.cache, opts.ResyncInterval)); err != nil {
		return fmt.Errorf("add store anti-entropy: %w", err)
	}
	// Every source's handler notes what it enqueues (ctrlrt.Triggers), so that each
	// reconcile is counted under its trigger in registrar_reconciles_total. The registry's own
	// events are a Watches rather than For for that reason (For's handler cannot be wrapped);
	// the logger keeps For's keys.
	m := r.mapper()
	b := ctrl.NewControllerManagedBy(mgr).
		Watches(&v1beta1.ServiceRegistry{}, r.triggers.Handler(ctrlrt.TriggerRegistry, &handler.EnqueueRequestForObject{}),
			builder.WithPredicates(ctrlrt.InShards(opts.Shards), ctrlrt.NotOwnStatusWrite(r.status.Echoes()))).
		// Every pod event reaches the selector index, whatever its shard: a shard taken over
		// later must find its pods indexed. Requests of other shards are dropped at the queue.
		Watches(&corev1.Pod{}, r.triggers.Handler(ctrlrt.TriggerPod, m.PodEvents())).
		Watches(&v1beta1.ServiceRegistry{}, r.triggers.Handler(ctrlrt.TriggerServicePeer, handler.EnqueueRequestsFromMapFunc(m.Peers)),
			builder.WithPredicates(ctrlrt.NotStatusOnly(r.status.Echoes())))
	if r.NodeLeaseTimeout > 0 {
		b = r.watchNodes(b, m)
	}
	// storeEvents notes the anti-entropy triggers (store-watch, store-resync) as it sends.
	b = b.WatchesRawSource(source.Channel(storeEvents.Repairs, &handler.EnqueueRequestForObject{}))
	b = b.WatchesRawSource(source.Channel(storeEvents.Resyncs, enqueue.LowPriority()))
	// The registries whose registered pods went while no operator ran go first too, once
	// the workers run (enqueue.Startup): a pod event the operator missed.
	r.startup = enqueue.NewStartup(mgr.GetClient())
	if err := mgr.Add(r.startup); err != nil {
		return fmt.Errorf("add the startup triage: %w", err)
	}
	b = b.WatchesRawSource(source.Channel(r.startup.Events, r.triggers.Handler(ctrlrt.TriggerPod, &handler.EnqueueRequestForObject{})))
	if opts.StoreRecovered != nil {
		b = b.WatchesRawSource(source.Channel(opts.StoreRecovered,
			r.triggers.Handler(ctrlrt.TriggerStoreRecovered, handler.EnqueueRequestsFromMapFunc(m.AllRegistries))))
	}
	return b.
		WithOptions(registryControllerOptions(mgr.GetClient(), mgr.GetLogger(), opts)).
		Named("serviceregistry").
		Complete(ctrlrt.Sharded(r, opts.Shards))
}

// components builds the parts the reconciler delegates to from its configuration: the store
// sync (storesync), node liveness (nodeliveness) and the cluster reads (regcache, over
// r.index when set), reading through c.
func (r *ServiceRegistryReconciler) components(c client.Client) {
	r.cache = regcache.New(c, r.index)
	r.report = report.New(r.Recorder, r.Clock, r.EndpointEvents)
	r.gates = &gates.Writer{Client: c, Clock: r.Clock, Acks: gates.NewAcks()}
	r.syncer = storesync.New(storesync.Config{Stores: r.Stores, Clock: r.Clock, Recorder: r.Recorder})
	r.nodes = nodeliveness.New(nodeliveness.Config{Client: c, Clock: r.Clock, Timeout: r.NodeLeaseTimeout, Guard: r.LeaseGuard})
}

// mapper maps the controller's events to the registries they concern (enqueue).
func (r *ServiceRegistryReconciler) mapper() *enqueue.Mapper {
	return &enqueue.Mapper{Client: r.Client, Index: r.index, Cache: r.cache, Tenancy: r.Tenancy, Forget: r.syncer.ForgetRecords}
}

// registryControllerOptions are the options the ServiceRegistry controller is built with:
// its workers, its retry backoff, its queue (sharded when opts.Shards is set) and its
// reconciles' logger (requestLogger). All in one place: builder.WithOptions replaces every
// option set before it, a WithLogConstructor included.
func registryControllerOptions(c client.Client, log logr.Logger, opts Options) controller.Options {
	return ctrlrt.ShardedOptions(controller.Options{
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		RateLimiter:             backoff.New[reconcile.Request](opts.RetryBase, opts.RetryMax, 0.2),
		LogConstructor:          ctrlrt.RequestLogger(log, "serviceregistry", "ServiceRegistry"),
	}, opts.Shards, ctrlrt.ListRegistries(c))
}
