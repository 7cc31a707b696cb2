// Package ctrlrt is the plumbing registrar's controllers share around controller-runtime:
// sharded queues and reconcilers (--sharding=lease: each replica queues and reconciles only
// the namespaces of its shards) and the reconcile loggers. It decides nothing about
// registries, pods or stores.
package ctrlrt

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Shards is what the controllers need of sharding (--sharding=lease; internal/sharding's
// Coordinator): nil means one replica does everything (leader election).
type Shards interface {
	// Owns reports whether this replica reconciles namespace now.
	Owns(namespace string) bool
	// Begin brackets one reconcile of something in namespace; ok is false when the shard is
	// not this replica's (or is being handed over), else done must be called at the end.
	Begin(namespace string) (done func(), ok bool)
	// OnAcquire registers a callback for shards just taken, OnRelease one for shards just
	// given up or lost; owns tells the namespaces of those shards.
	OnAcquire(f func(ctx context.Context, owns func(namespace string) bool))
	OnRelease(f func(owns func(namespace string) bool))
}

// filteredQueue drops every request of a namespace outside this replica's shards as it
// is added, whatever its source (watch events, channels, retries, requeues): the other
// replicas' registries are never even queued here.
type filteredQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	owns func(namespace string) bool
}

func (q *filteredQueue) Add(r reconcile.Request) {
	if q.owns(r.Namespace) {
		q.TypedRateLimitingInterface.Add(r)
	}
}

func (q *filteredQueue) AddRateLimited(r reconcile.Request) {
	if q.owns(r.Namespace) {
		q.TypedRateLimitingInterface.AddRateLimited(r)
	}
}

func (q *filteredQueue) AddAfter(r reconcile.Request, d time.Duration) {
	if q.owns(r.Namespace) {
		q.TypedRateLimitingInterface.AddAfter(r, d)
	}
}

// ShardedOptions makes o's queue a filteredQueue when shards is set, and enqueues the
// objects list returns of every shard this replica takes (events of a shard nobody owned
// were dropped, and a new owner must look at all of its objects once).
func ShardedOptions(o controller.Options, shards Shards, list func(ctx context.Context) ([]reconcile.Request, error)) controller.Options {
	if shards == nil {
		return o
	}
	o.NewQueue = func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := &filteredQueue{
			TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name}),
			owns:                       shards.Owns,
		}
		shards.OnAcquire(func(ctx context.Context, in func(string) bool) {
			reqs, err := list(ctx)
			if err != nil {
				log.FromContext(ctx).Error(err, "list the objects of acquired shards", "controller", name)
				return
			}
			for _, r := range reqs {
				if in(r.Namespace) {
					q.Add(r)
				}
			}
		})
		return q
	}
	return o
}

// InShards passes the events of objects in this replica's shards (all without sharding), so
// that a pod event of another replica's namespace costs no mapping to registries here.
func InShards(shards Shards) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return shards == nil || shards.Owns(o.GetNamespace()) })
}

// guarded runs a reconcile only while its namespace's shard is this replica's, and
// counts it as running so that the shard is handed over only once it has finished.
type guarded struct {
	reconcile.Reconciler
	shards Shards
}

func (g guarded) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	done, ok := g.shards.Begin(req.Namespace)
	if !ok {
		return reconcile.Result{}, nil
	}
	defer done()
	return g.Reconciler.Reconcile(ctx, req)
}

// Sharded wraps r with guarded when shards is set.
func Sharded(r reconcile.Reconciler, shards Shards) reconcile.Reconciler {
	if shards == nil {
		return r
	}
	return guarded{Reconciler: r, shards: shards}
}

// ListRegistries are requests for every ServiceRegistry in the cache.
func ListRegistries(c client.Reader) func(ctx context.Context) ([]reconcile.Request, error) {
	return func(ctx context.Context) ([]reconcile.Request, error) {
		var regs v1beta1.ServiceRegistryList
		if err := c.List(ctx, &regs, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		out := make([]reconcile.Request, len(regs.Items))
		for i := range regs.Items {
			out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&regs.Items[i])}
		}
		return out, nil
	}
}
