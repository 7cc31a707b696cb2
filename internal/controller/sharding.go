package controller

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// shardFilteredQueue drops every request of a namespace outside this replica's shards as it
// is added, whatever its source (watch events, channels, retries, requeues): the other
// replicas' registries are never even queued here.
type shardFilteredQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	owns func(namespace string) bool
}

func (q *shardFilteredQueue) Add(r reconcile.Request) {
	if q.owns(r.Namespace) {
		q.TypedRateLimitingInterface.Add(r)
	}
}

func (q *shardFilteredQueue) AddRateLimited(r reconcile.Request) {
	if q.owns(r.Namespace) {
		q.TypedRateLimitingInterface.AddRateLimited(r)
	}
}

func (q *shardFilteredQueue) AddAfter(r reconcile.Request, d time.Duration) {
	if q.owns(r.Namespace) {
		q.TypedRateLimitingInterface.AddAfter(r, d)
	}
}

// shardedOptions makes o's queue a shardFilteredQueue when shards is set, and enqueues the
// objects list returns of every shard this replica takes (events of a shard nobody owned
// were dropped, and a new owner must look at all of its objects once).
func shardedOptions(o controller.Options, shards Shards, list func(ctx context.Context) ([]reconcile.Request, error)) controller.Options {
	if shards == nil {
		return o
	}
	o.NewQueue = func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := &shardFilteredQueue{
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

// inShards passes the events of objects in this replica's shards (all without sharding), so
// that a pod event of another replica's namespace costs no mapping to registries here.
func inShards(shards Shards) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return shards == nil || shards.Owns(o.GetNamespace()) })
}

// shardGuarded runs a reconcile only while its namespace's shard is this replica's, and
// counts it as running so that the shard is handed over only once it has finished.
type shardGuarded struct {
	reconcile.Reconciler
	shards Shards
}

func (g shardGuarded) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	done, ok := g.shards.Begin(req.Namespace)
	if !ok {
		return reconcile.Result{}, nil
	}
	defer done()
	return g.Reconciler.Reconcile(ctx, req)
}

// sharded wraps r with shardGuarded when shards is set.
func sharded(r reconcile.Reconciler, shards Shards) reconcile.Reconciler {
	if shards == nil {
		return r
	}
	return shardGuarded{Reconciler: r, shards: shards}
}

// listRegistries are requests for every ServiceRegistry in the cache.
func listRegistries(c client.Reader) func(ctx context.Context) ([]reconcile.Request, error) {
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

// listAnnotatedDeployments are requests for every Deployment with registrar.dev/service,
// and for the Deployment of every ServiceRegistry (one that lost the annotation while its
// shard had no owner).
func listAnnotatedDeployments(c client.Reader) func(ctx context.Context) ([]reconcile.Request, error) {
	return func(ctx context.Context) ([]reconcile.Request, error) {
		var deps appsv1.DeploymentList
		if err := c.List(ctx, &deps, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		var out []reconcile.Request
		for i := range deps.Items {
			if hasServiceAnnotation(&deps.Items[i]) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&deps.Items[i])})
			}
		}
		regs, err := listRegistries(c)(ctx)
		return append(out, regs...), err
	}
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
