// Package operator is the assembly of the operator's controllers: Setup builds the
// ServiceRegistry reconciler (internal/controller, with its status writer, store anti-entropy,
// warm-up tracker and the gate releaser) and the Deployment reconciler (deployment) from one
// Config, the one constructor cmd/main.go and every envtest suite use, so that the suites run
// the controllers as the binary does. It also owns what the manager is built with for them
// (CacheByObject) and the defaults of cmd's flags that the reconcilers do not apply
// themselves.
package operator

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/registrar-dev/registrar/internal/controller"
	"github.com/registrar-dev/registrar/internal/controller/deployment"
	"github.com/registrar-dev/registrar/internal/leancache"
	"github.com/registrar-dev/registrar/internal/leaseguard"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/internal/tenancy"
	"github.com/registrar-dev/registrar/internal/warmup"
)

// The defaults of cmd/'s --max-concurrent-reconciles and --max-concurrent-warmups; the
// envtest suites that run the operator as cmd/ does use them too.
const (
	DefaultMaxConcurrentReconciles = 8
	DefaultMaxConcurrentWarmups    = 64
)

// Config is everything the operator's controllers are built from: cmd's flags, or a test
// suite's choices. Setup is the one place that builds them, so that the suites run the
// controllers as the binary does.
type Config struct {
	// Stores are the installation's named stores (--stores), each registry published to those
	// its spec.stores names, else the defaults. Required: a single store is one named store.
	Stores *multi.Stores
	// StoreName describes the stores in status messages (e.g. their endpoints).
	StoreName string
	// Recorder emits Events on registries, pods and Deployments.
	Recorder recorder.EventRecorder
	// Clock stamps registeredAt and status times; clock.RealClock{} when nil.
	Clock clock.PassiveClock
	// Cluster is written into each endpoint's cluster field.
	Cluster string
	// Warmup sends warm-up requests to gated pods.
	Warmup *warmup.Runner
	// CallerCacheSeconds is the callers' cache TTL assumed when spec.drain.callerCacheSeconds
	// is unset (--caller-cache-seconds).
	CallerCacheSeconds int32
	// NodeLeaseTimeout is --node-lease-timeout; 0 ignores node Leases.
	NodeLeaseTimeout time.Duration
	// LeaseGuard is the node Lease guard (--lease-guard-*); the zero Config never holds.
	LeaseGuard leaseguard.Config
	// Tenancy is --service-name-tenancy.
	Tenancy tenancy.Mode
	// EndpointEvents is the budget of the per-endpoint Events; nil emits every one.
	EndpointEvents *rate.Limiter
	// Publisher, when set, follows every reconcile's verdicts besides the stores (the xDS
	// server); XDSGateAckTimeout makes a new pod's gate wait for its clients' ACKs.
	Publisher         publish.Publisher
	XDSGateAckTimeout time.Duration
	// StoreHealth, when set, feeds the StoreHealthy condition (self-monitoring).
	StoreHealth controller.StoreHealthSource
	// Options tune the controllers (concurrency, retries, status pacing, anti-entropy,
	// sharding).
	Options controller.Options
}

// Controllers are the controllers Setup registered.
type Controllers struct {
	Registry   *controller.ServiceRegistryReconciler
	Deployment *deployment.Reconciler
}

// Setup registers every controller of the operator with mgr, from cfg: the ServiceRegistry
// reconciler (with its status writer, store anti-entropy, warm-up tracker and the gate
// releaser) and the Deployment reconciler.
func Setup(mgr ctrl.Manager, cfg Config) (*Controllers, error) {
	if cfg.Stores == nil {
		return nil, errors.New("operator.Setup: no stores configured")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	r := &controller.ServiceRegistryReconciler{
		Client: mgr.GetClient(), Stores: cfg.Stores, StoreName: cfg.StoreName, Recorder: cfg.Recorder,
		Clock: cfg.Clock, Cluster: cfg.Cluster, Warmup: cfg.Warmup, CallerCacheSeconds: cfg.CallerCacheSeconds,
		NodeLeaseTimeout: cfg.NodeLeaseTimeout, EndpointEvents: cfg.EndpointEvents, Publisher: cfg.Publisher,
		StoreHealth: cfg.StoreHealth, XDSGateAckTimeout: cfg.XDSGateAckTimeout, LeaseGuard: cfg.LeaseGuard,
		Tenancy: cfg.Tenancy,
	}
	if err := r.SetupWithManager(mgr, cfg.Options); err != nil {
		return nil, fmt.Errorf("set up ServiceRegistry controller: %w", err)
	}
	d := &deployment.Reconciler{Client: mgr.GetClient(), Recorder: cfg.Recorder, Shards: cfg.Options.Shards}
	if err := d.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up Deployment controller: %w", err)
	}
	return &Controllers{Registry: r, Deployment: d}, nil
}

// CacheByObject is the informer cache configuration of the objects the operator caches in
// bulk: pods and Deployments are trimmed to what it reads of them (internal/leancache), on
// top of the default transform that strips managedFields. Nodes are read as metadata only
// (zoneOf), so their informer is a metadata-only watch. cmd/main.go adds the Lease
// namespace; the envtest suites use it as is.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}:        {Transform: leancache.TransformPod},
		&appsv1.Deployment{}: {Transform: leancache.TransformDeployment},
	}
}
