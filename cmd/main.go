// Command registrar is the registrar operator: it mirrors the ready pods selected by
// ServiceRegistries into an external service registry store (etcd).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/certs"
	"github.com/registrar-dev/registrar/internal/controller"
	"github.com/registrar-dev/registrar/internal/controller/ctrlrt"
	"github.com/registrar-dev/registrar/internal/controller/nodeliveness"
	"github.com/registrar-dev/registrar/internal/controller/operator"
	"github.com/registrar-dev/registrar/internal/eventqueue"
	"github.com/registrar-dev/registrar/internal/leaseguard"
	"github.com/registrar-dev/registrar/internal/memlimit"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/store"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
	"github.com/registrar-dev/registrar/internal/tenancy"
	"github.com/registrar-dev/registrar/internal/warmup"
)

var setupLog = ctrl.Log.WithName("setup")

// config is everything the flags set.
type config struct {
	metricsAddr, probeAddr  string
	pprofAddr               string
	leaderElect             bool
	kubeAPICompression      bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	fenceName               string
	clusterName             string
	maxConcurrentReconciles int
	maxConcurrentWarmups    int
	endpointEventsQPS       float64
	endpointEventsBurst     int
	callerCacheSeconds      int
	nodeLeaseTimeout        time.Duration
	tenancy                 tenancy.Mode
	leaseGuard              leaseguard.Config
	storeEndpoints          string
	storePrefix             string
	storeTimeout            time.Duration
	storeBatch              bool
	storeLeaseTTL           time.Duration
	statusWriteInterval     time.Duration
	statusWritesQPS         float64
	storeResyncInterval     time.Duration
	storeCA, storeCert      string
	storeKey                string
	storeDataDir            string
	embeddedClientURL       string
	embeddedPeerURL         string
	stores                  storesConfig
	storePKI                storePKIConfig
	webhook                 webhookConfig
	xds                     xdsConfig
	selfmon                 selfMonConfig
	sharding                shardingConfig
	multicluster            clusterConfig
	memoryLimitRatio        float64
	gcPercent               int
}

func parseFlags(args []string) (config, zap.Options, error) {
	var c config
	zopts := zap.Options{Development: false}
	fs := newFlagSet(&c, &zopts)
	if err := fs.Parse(args); err != nil {
		return c, zopts, err
	}
	if err := c.sharding.validate(&c); err != nil {
		return c, zopts, err
	}
	if c.leaderElect && (c.retryPeriod <= 0 || c.retryPeriod >= c.renewDeadline || c.renewDeadline >= c.leaseDuration) {
		return c, zopts, fmt.Errorf("leader election needs 0 < --leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration")
	}
	if (c.storeCert == "") != (c.storeKey == "") {
		return c, zopts, fmt.Errorf("--store-cert-file and --store-key-file go together")
	}
	if c.webhook.selfSignedSecret != "" && len(certs.ParseHosts(c.webhook.selfSignedHosts)) == 0 {
		return c, zopts, fmt.Errorf("--webhook-self-signed-secret keeps the certificate of --webhook-self-signed-hosts: set both")
	}
	if err := c.storePKI.validate(&c); err != nil {
		return c, zopts, err
	}
	names, err := c.stores.names()
	if err != nil {
		return c, zopts, err
	}
	if err := c.multicluster.validate(names, c.storeLeaseTTL); err != nil {
		return c, zopts, err
	}
	if err := c.xds.validate(); err != nil {
		return c, zopts, err
	}
	if err := c.leaseGuard.Validate(); err != nil {
		return c, zopts, err
	}
	if c.memoryLimitRatio < 0 || c.memoryLimitRatio > 1 {
		return c, zopts, fmt.Errorf("--memory-limit-ratio=%v: want 0 (off) to 1", c.memoryLimitRatio)
	}
	if c.statusWritesQPS < 0 {
		return c, zopts, fmt.Errorf("--status-writes-qps=%v: want 0 (no limit) or more", c.statusWritesQPS)
	}
	if c.gcPercent < 0 || c.gcPercent > memlimit.MaxGCPercent {
		return c, zopts, fmt.Errorf("--gc-percent=%d: want 0 (Go's default) to %d", c.gcPercent, memlimit.MaxGCPercent)
	}
	return c, zopts, nil
}

// newFlagSet registers every flag of the manager, bound to c and zopts, on a fresh
// FlagSet; docs/reference.md is generated from it (`make docs`, cmd/reference_test.go).
func newFlagSet(c *config, zopts *zap.Options) *flag.FlagSet {
	fs := flag.NewFlagSet("registrar", flag.ContinueOnError)
	_, inCluster := os.LookupEnv("KUBERNETES_SERVICE_HOST")
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8080", "Address the metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	fs.StringVar(&c.pprofAddr, "pprof-bind-address", "", "Address serving Go's net/http/pprof profiles (e.g. 127.0.0.1:8082); empty or 0 disables it, and with it Go's heap sampling (unless GODEBUG sets memprofilerate).")
	fs.BoolVar(&c.kubeAPICompression, "kube-api-compression", false, "Ask the Kubernetes API server to gzip its answers and watch streams. Off, as kube-controller-manager and kube-scheduler run: on the cluster's network, compression costs CPU on both ends and adds latency.")
	fs.BoolVar(&c.leaderElect, "leader-elect", inCluster, "Elect a leader so only one replica writes (default true inside a cluster).")
	fs.StringVar(&c.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	fs.DurationVar(&c.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a follower waits after the leader's last renewal before it takes over.")
	fs.DurationVar(&c.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader retries renewing before it steps down (less than the lease duration).")
	fs.DurationVar(&c.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often leader election clients retry.")
	fs.StringVar(&c.fenceName, "store-fence-name", "", "Names this installation's write fence {prefix}/.registrar/fence/{name}; replicas of one installation share it (default: the leader election namespace).")
	fs.StringVar(&c.clusterName, "cluster-name", "", "Written into each endpoint's cluster field.")
	fs.IntVar(&c.maxConcurrentReconciles, "max-concurrent-reconciles", operator.DefaultMaxConcurrentReconciles, "ServiceRegistries synced at once.")
	fs.Float64Var(&c.endpointEventsQPS, "endpoint-events-qps", 10, "Operator-wide rate of the Registered and Deregistered Events of endpoint changes (one API write each); those beyond it are skipped and counted in registrar_endpoint_events_skipped_total; 0 disables them.")
	fs.IntVar(&c.endpointEventsBurst, "endpoint-events-burst", 50, "Burst of --endpoint-events-qps.")
	fs.IntVar(&c.maxConcurrentWarmups, "max-concurrent-warmups", operator.DefaultMaxConcurrentWarmups, "Pods warmed up at once, across all registries.")
	fs.TextVar(&c.tenancy, "service-name-tenancy", tenancy.ModeNamespace, `Who may publish under a service name: "namespace" gives a name to the namespace of its oldest ServiceRegistry, and refuses registries of other namespaces unless the owner shares it (spec.sharing.namespaces); "shared" lets any namespace join any service (callers get every namespace's endpoints of a name). docs/security.md, "Tenancy".`)
	fs.DurationVar(&c.nodeLeaseTimeout, "node-lease-timeout", 20*time.Second, "Deregister the pods of a node whose Lease was not renewed for this long (the Lease's duration applies when shorter); 0 disables.")
	fs.IntVar(&c.callerCacheSeconds, "caller-cache-seconds", v1beta1.DefaultCallerCacheSeconds,
		"Callers' cache TTL assumed by the drain advice when spec.drain.callerCacheSeconds is unset.")
	fs.StringVar(&c.storeEndpoints, "store-endpoints", os.Getenv("REGISTRAR_STORE_ENDPOINTS"), "Comma-separated etcd client URLs; empty runs an embedded etcd (env REGISTRAR_STORE_ENDPOINTS).")
	fs.StringVar(&c.storePrefix, "store-prefix", envOr("REGISTRAR_STORE_PREFIX", etcdstore.DefaultPrefix), "Key prefix of every endpoint (env REGISTRAR_STORE_PREFIX).")
	fs.DurationVar(&c.storeTimeout, "store-timeout", etcdstore.DefaultTimeout, "Timeout of every store call.")
	fs.BoolVar(&c.storeBatch, "store-batch", true, "Under load, write the changes of several ServiceRegistries to the etcd store in one guarded transaction (while one is in flight, the next coalesces what arrives); when idle every change is written at once either way.")
	fs.DurationVar(&c.storeLeaseTTL, "store-lease-ttl", 0, "When set, write endpoints with an etcd lease of this TTL that the leader keeps alive, so they expire if every replica is gone longer; 0 (default) keeps them until an operator removes them.")
	fs.Float64Var(&c.statusWritesQPS, "status-writes-qps", controller.DefaultStatusWritesQPS, "Operator-wide rate of the ServiceRegistry status writes that --status-write-interval paces (counts, status.endpoints, messages; the burst is the same number): beyond it a registry waits its turn, so a flood of pod events across many registries costs the API server a bounded number of status writes; condition and observedGeneration changes never wait, and the store is never delayed. Counted in registrar_status_writes_total and registrar_status_writes_deferred_total. 0 is no limit.")
	fs.DurationVar(&c.statusWriteInterval, "status-write-interval", controller.DefaultStatusWriteInterval, "Least time between two status writes of one ServiceRegistry that only update its counts, status.endpoints or messages (the newest is written when it ends); a change of a condition or of observedGeneration is written at once, and the store is never delayed. 0 writes every change at once.")
	fs.DurationVar(&c.storeResyncInterval, "store-resync-interval", controller.DefaultResyncInterval, "Period (jittered by ±20%) of the full re-read of every registry's records in every store, diffed with what the operator knows and repaired; the backstop of the etcd and CoreDNS watches that repair outside changes at once (and the only anti-entropy of ZooKeeper).")
	fs.StringVar(&c.storeCA, "store-ca-file", "", "CA bundle to verify the store's TLS certificate.")
	fs.StringVar(&c.storeCert, "store-cert-file", "", "Client certificate for the store.")
	fs.StringVar(&c.storeKey, "store-key-file", "", "Client key for the store.")
	fs.StringVar(&c.storeDataDir, "store-data-dir", "registrar-data", "Data directory of the embedded etcd (used without --store-endpoints).")
	fs.StringVar(&c.embeddedClientURL, "embedded-store-client-url", "http://127.0.0.1:2379", "Where the embedded etcd serves clients.")
	fs.StringVar(&c.embeddedPeerURL, "embedded-store-peer-url", "http://127.0.0.1:2380", "Where the embedded etcd listens for peers.")
	fs.Float64Var(&c.memoryLimitRatio, "memory-limit-ratio", 0.9, "Set Go's soft memory limit to this share of the container's memory limit (cgroup v2 memory.max or v1 memory.limit_in_bytes), so the garbage collector works harder near the limit instead of the process being OOM-killed; 0 disables; an explicit GOMEMLIMIT wins; nothing is set without a limit.")
	fs.IntVar(&c.gcPercent, "gc-percent", memlimit.DefaultGCPercent, "The garbage collector's pacing (GOGC): collect when the heap has grown by this share of what the last collection left live, or by 8 MiB when that is more. "+
		"Below Go's 100 to trade a little CPU for memory (docs/performance.md); 0 keeps Go's default; an explicit GOGC wins.")
	bindStoreFlags(fs, &c.stores)
	bindStorePKIFlags(fs, &c.storePKI)
	bindWebhookFlags(fs, &c.webhook)
	bindXDSFlags(fs, &c.xds)
	bindSelfMonFlags(fs, &c.selfmon)
	bindShardingFlags(fs, &c.sharding)
	bindLeaseGuardFlags(fs, &c.leaseGuard)
	bindClusterFlags(fs, &c.multicluster)
	if kc := flag.CommandLine.Lookup("kubeconfig"); kc != nil { // registered by controller-runtime
		fs.Var(kc.Value, kc.Name, kc.Usage)
	}
	zopts.BindFlags(fs)
	return fs
}

// applyMemoryLimit sets the runtime's soft memory limit from the container's memory limit
// and the collector's pacing (internal/memlimit), and logs what it did.
func applyMemoryLimit(ratio float64, gcPercent int) error {
	p, pacingErr := memlimit.GCPercent(gcPercent, os.Getenv("GOGC"))
	if pacingErr == nil {
		if p.Percent > 0 {
			debug.SetGCPercent(p.Percent)
			// Process-long: the pacing follows the live heap until the process exits.
			_ = memlimit.KeepHeadroom(p.Percent, debug.SetGCPercent)
		}
		setupLog.Info("Go GC pacing", "percent", p.Percent, "minHeadroomBytes", memlimit.MinHeadroom, "reason", p.Reason)
	}
	d, limitErr := memlimit.Soft(os.DirFS("/sys/fs/cgroup"), ratio, os.Getenv("GOMEMLIMIT"))
	if limitErr == nil {
		if d.Limit > 0 {
			debug.SetMemoryLimit(d.Limit)
		}
		setupLog.Info("Go soft memory limit", "bytes", d.Limit, "containerLimitBytes", d.Container, "reason", d.Reason)
	}
	return errors.Join(pacingErr, limitErr)
}

// heapProfileRate is the runtime's heap profiling rate to use: none when no profile can be
// served (--pprof-bind-address empty or 0), since nobody can read the samples, yet each
// costs a stack walk and the profile keeps a table of their stacks (~1.7 MB of runtime
// memory in the 5,000-pod benchmark, docs/performance.md); else, or when GODEBUG sets
// memprofilerate explicitly, current (Go's default unless GODEBUG changed it).
func heapProfileRate(pprofAddr, godebug string, current int) int {
	if pprofAddr != "" && pprofAddr != "0" {
		return current
	}
	for _, kv := range strings.Split(godebug, ",") {
		if strings.HasPrefix(strings.TrimSpace(kv), "memprofilerate=") {
			return current
		}
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func main() {
	cfg, zopts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	goruntime.MemProfileRate = heapProfileRate(cfg.pprofAddr, os.Getenv("GODEBUG"), goruntime.MemProfileRate)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	if err := applyMemoryLimit(cfg.memoryLimitRatio, cfg.gcPercent); err != nil {
		setupLog.Error(err, "Go GC pacing or soft memory limit not set")
	}
	if err := run(ctrl.SetupSignalHandler(), cfg); err != nil {
		setupLog.Error(err, "registrar stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	endpoints, stopStore, err := storeEndpoints(ctx, cfg)
	if err != nil {
		return err
	}
	defer stopStore()
	if cfg.storePKI.secret != "" {
		restCfg, err := ctrl.GetConfig()
		if err != nil {
			return fmt.Errorf("store PKI: %w", err)
		}
		if err := cfg.storePKI.apply(ctx, restCfg, podNamespace(), &cfg); err != nil {
			return err
		}
	}
	cli, err := etcdclient.New(etcdclient.Config{
		Endpoints: endpoints, CAFile: cfg.storeCA, CertFile: cfg.storeCert, KeyFile: cfg.storeKey,
	})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	mgr, err := newManager(cfg)
	if err != nil {
		return err
	}
	if err := cfg.multicluster.resolve(ctx, mgr.GetConfig(), cfg.clusterName, fenceName(cfg)); err != nil {
		return err
	}
	cfg.clusterName = cfg.multicluster.id
	var (
		guard  etcdstore.WriteGuard
		shards ctrlrt.Shards
		fence  *fence.Fence
	)
	if cfg.sharding.enabled() { // --store-shared needs --store-lease-ttl, which sharding refuses
		coord, fences, err := setupSharding(mgr, cfg, cli)
		if err != nil {
			return err
		}
		guard, shards = fences, coord
	} else {
		fence, err = cfg.multicluster.newFence(ctx, cli, cfg.storePrefix, fenceName(cfg), identity(), cfg.storeTimeout)
		if err != nil {
			return err
		}
		if err := mgr.Add(fence); err != nil { // needs leader election: taken once this replica leads
			return fmt.Errorf("add write fence: %w", err)
		}
		guard = fence
	}
	events, err := eventRecorder(mgr)
	if err != nil {
		return err
	}
	if err := setupControllers(mgr, cfg, cli, guard, shards, endpoints, events); err != nil {
		return err
	}
	if err := setupWebhook(mgr, cfg.webhook, events); err != nil {
		return err
	}
	if fence == nil {
		setupLog.Info("starting manager", "store", endpoints, "prefix", cfg.storePrefix, "sharding", cfg.sharding.mode,
			"shardID", cfg.sharding.id, "shards", cfg.sharding.count)
		return mgr.Start(ctx)
	}
	go func() {
		select {
		case <-fence.Lost():
			setupLog.Info("another leader took the store's write fence: stepping down", "fence", fence.Key())
			cancel()
		case <-ctx.Done():
		}
	}()
	setupLog.Info("starting manager", "store", endpoints, "prefix", cfg.storePrefix, "leaderElection", cfg.leaderElect, "fence", fence.Key(),
		"cluster", cfg.multicluster.id, "sharedStore", cfg.multicluster.shared)
	err = mgr.Start(ctx)
	select {
	case <-fence.Lost():
		return errors.Join(err, fmt.Errorf("deposed: %w", store.ErrFenced))
	default:
		return err
	}
}

// fenceName is --store-fence-name, else the namespace leader election uses.
func fenceName(cfg config) string {
	if cfg.fenceName != "" {
		return cfg.fenceName
	}
	if cfg.leaderElectionNamespace != "" {
		return cfg.leaderElectionNamespace
	}
	if ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(ns) > 0 {
		return strings.TrimSpace(string(ns))
	}
	return "default"
}

// identity names this process in the fence key's value.
func identity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s_%d_%d", host, os.Getpid(), time.Now().UnixNano())
}

// storeEndpoints returns the configured store, or starts the embedded one.
func storeEndpoints(ctx context.Context, cfg config) ([]string, func(), error) {
	if cfg.storeEndpoints != "" {
		return strings.Split(cfg.storeEndpoints, ","), func() {}, nil
	}
	setupLog.Info("no --store-endpoints: starting an embedded etcd", "dataDir", cfg.storeDataDir, "clientURL", cfg.embeddedClientURL)
	srv, err := etcdclient.StartEmbedded(etcdclient.EmbeddedConfig{
		DataDir: cfg.storeDataDir, ClientURL: cfg.embeddedClientURL, PeerURL: cfg.embeddedPeerURL,
	})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(ctx); err != nil {
			setupLog.Error(err, "embedded store failed")
		}
	}()
	return srv.Endpoints(), func() { cancel(); <-done }, nil
}

// newScheme holds the built-in types and registrar's.
func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1beta1.AddToScheme(scheme))
	// v1alpha1 too: the conversion webhook decodes and converts it.
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	return scheme
}

func newManager(cfg config) (ctrl.Manager, error) {
	scheme := newScheme()
	mgr, err := ctrl.NewManager(localConfig(ctrl.GetConfigOrDie(), cfg.kubeAPICompression), ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         cacheByObject(),
		},
		Metrics:                       metricsserver.Options{BindAddress: cfg.metricsAddr},
		HealthProbeBindAddress:        cfg.probeAddr,
		PprofBindAddress:              cfg.pprofAddr,
		WebhookServer:                 newWebhookServer(cfg.webhook),
		LeaderElection:                cfg.leaderElect,
		LeaderElectionID:              "registrar.registrar.dev",
		LeaderElectionNamespace:       cfg.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &cfg.leaseDuration,
		RenewDeadline:                 &cfg.renewDeadline,
		RetryPeriod:                   &cfg.retryPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add ready check: %w", err)
	}
	return mgr, nil
}

// localConfig is the client configuration of the operator's own cluster: without response
// compression unless asked for, as kube-controller-manager and kube-scheduler are configured
// (kubernetes/kubernetes#80919): the operator decodes every pod and ServiceRegistry event,
// and gzip on a local network only adds CPU on both ends and latency.
func localConfig(rc *rest.Config, compression bool) *rest.Config {
	rc = rest.CopyConfig(rc)
	rc.DisableCompression = !compression
	return rc
}

// cacheByObject trims the cached pods and Deployments to what registrar reads of them
// (operator.CacheByObject), and caches only the kubelets' node Leases, not every Lease of
// the cluster.
func cacheByObject() map[client.Object]cache.ByObject {
	by := operator.CacheByObject()
	by[&coordinationv1.Lease{}] = cache.ByObject{Namespaces: map[string]cache.Config{nodeliveness.LeaseNamespace: {}}}
	return by
}

// eventRecorder is where registrar's Events go: one writer with a bounded queue
// (internal/eventqueue), not client-go's broadcaster and its six-minute copy of each Event.
func eventRecorder(mgr ctrl.Manager) (*eventqueue.Recorder, error) {
	rec := eventqueue.New(eventqueue.Config{Scheme: mgr.GetScheme(), Controller: "registrar",
		Create: eventqueue.ClientCreate(mgr.GetClient()), OnDrop: metrics.EventDropped,
		Log: ctrl.Log.WithName("events")})
	if err := mgr.Add(rec); err != nil {
		return nil, fmt.Errorf("add the Event writer: %w", err)
	}
	return rec, nil
}

func setupControllers(mgr ctrl.Manager, cfg config, cli *clientv3.Client, guard etcdstore.WriteGuard, shards ctrlrt.Shards,
	endpoints []string, events *eventqueue.Recorder) error {
	recovered := make(chan event.GenericEvent, 1)
	resync := func(why string) func() {
		return func() {
			setupLog.Info(why+": syncing every ServiceRegistry", "store", endpoints)
			select { // one pending event is enough: it enqueues every registry
			case recovered <- event.GenericEvent{Object: &v1beta1.ServiceRegistry{}}:
			default:
			}
		}
	}
	etcdOpts := etcdstore.Options{
		Prefix: cfg.storePrefix, Timeout: cfg.storeTimeout,
		OnRecover: resync("store reachable again"),
		LeaseTTL:  cfg.storeLeaseTTL, Leases: cli, LeaseKey: cfg.multicluster.leaseKey(cfg.storePrefix, fenceName(cfg)),
		OnLeaseLost: resync("endpoint lease expired"),
		Cluster:     cfg.multicluster.storeCluster(),
		NoBatch:     !cfg.storeBatch, OnTxn: metrics.ObserveStoreTxn,
	}
	stores, storeName, err := buildStores(mgr, cfg, cli, endpoints, guard, etcdOpts)
	if err != nil {
		return err
	}
	health, err := setupSelfMonitoring(mgr, cfg, cli, endpoints, resync("store health changed"))
	if err != nil {
		return err
	}
	xdsServer, err := setupXDS(mgr, cfg, cli)
	if err != nil {
		return err
	}
	cc := operator.Config{
		Stores:    stores,
		StoreName: storeName,
		Recorder:  events,
		Cluster:   cfg.clusterName,
		Warmup: &warmup.Runner{
			Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}},
			Clock:  clock.RealClock{},
		},
		CallerCacheSeconds: int32(min(max(cfg.callerCacheSeconds, 0), 3600)),
		NodeLeaseTimeout:   cfg.nodeLeaseTimeout,
		Tenancy:            cfg.tenancy,
		LeaseGuard:         cfg.leaseGuard,
		EndpointEvents:     endpointEventBudget(cfg.endpointEventsQPS, cfg.endpointEventsBurst),
		Options: controller.Options{
			MaxConcurrentReconciles: cfg.maxConcurrentReconciles, MaxConcurrentWarmups: cfg.maxConcurrentWarmups,
			StoreRecovered: recovered, ResyncInterval: cfg.storeResyncInterval, Shards: shards,
			StatusWriteInterval: statusWriteInterval(cfg.statusWriteInterval),
			StatusWritesQPS:     statusWritesQPS(cfg.statusWritesQPS),
		},
	}
	if xdsServer != nil {
		cc.Publisher = xdsServer
		cc.XDSGateAckTimeout = cfg.xds.gateAckTimeout
	}
	if len(health) > 0 {
		cc.StoreHealth = health
	}
	if _, err := operator.Setup(mgr, cc); err != nil {
		return err
	}
	return nil
}

// endpointEventBudget is the token bucket of the per-endpoint Events; a rate or burst of 0
// (or less) allows none.
func endpointEventBudget(qps float64, burst int) *rate.Limiter {
	if qps <= 0 || burst <= 0 {
		return rate.NewLimiter(0, 0)
	}
	return rate.NewLimiter(rate.Limit(qps), burst)
}

// statusWritesQPS maps --status-writes-qps to controller.Options: 0 (no limit) is negative
// there, where 0 means the default.
func statusWritesQPS(qps float64) float64 {
	if qps <= 0 {
		return -1
	}
	return qps
}

// statusWriteInterval maps --status-write-interval to controller.Options: 0 (write every
// change at once) is a negative interval there, where 0 means the default.
func statusWriteInterval(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
