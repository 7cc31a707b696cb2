package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/ports"
)

// StorePrefix is where the operator writes; the TTL registries' instances write under
// TTLGracefulPrefix (they revoke their lease on deregistration) and TTLCrashPrefix (they crash).
const (
	StorePrefix       = "/registrar/services/"
	TTLGracefulPrefix = "/ttl-graceful/services/"
	TTLCrashPrefix    = "/ttl-crash/services/"
)

// cluster is every component of a run.
type cluster struct {
	env      *envtest.Environment
	cfg      *rest.Config
	kube     kubernetes.Interface
	client   client.Client
	store    *etcdtest.Server
	storeCli *clientv3.Client
	operator *process
	kcm      *process
	pprof    string // the operator's pprof address
	metrics  string // the operator's metrics address
	// kcmMetrics is kube-controller-manager's HTTPS address serving /metrics (with
	// Config.kcmMetrics only).
	kcmMetrics string
	// extra are more operator processes (the restart benchmark's fail-over pair), stopped
	// with the cluster.
	extra []*process
}

// startCluster starts the API server, the store, the operator and (optionally) the
// EndpointSlice controller.
func startCluster(ctx context.Context, c *Config) (_ *cluster, err error) {
	cl := &cluster{}
	defer func() {
		if err != nil {
			cl.stop()
		}
	}()
	if err := cl.startAPIServer(c.KubeEtcdNoFsync); err != nil {
		return nil, err
	}
	var storeArgs []string
	if c.StoreNoFsync {
		// the same flag envtest gives the API server's etcd by default
		storeArgs = append(storeArgs, "--unsafe-no-fsync")
	}
	if cl.store, err = etcdtest.StartWith(c.WorkDir, "127.0.0.1", storeArgs...); err != nil {
		return nil, fmt.Errorf("start store etcd: %w", err)
	}
	if cl.storeCli, err = cl.store.Client(); err != nil {
		return nil, fmt.Errorf("store client: %w", err)
	}
	if err := cl.startOperator(ctx, c); err != nil {
		return nil, err
	}
	if c.EndpointSlice {
		if err := cl.startKCM(c); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

func (cl *cluster) startAPIServer(noFsync bool) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cl.env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	// envtest starts its etcd with --unsafe-no-fsync (fast tests). Here the API server's etcd
	// writes to disk like the store's and like any production etcd: otherwise every pod write
	// (the floor) and every EndpointSlice write would skip the disk that each of registrar's
	// store writes pays for.
	cl.env.ControlPlane.Etcd = &envtest.Etcd{}
	cl.env.ControlPlane.Etcd.Configure().Set("unsafe-no-fsync", strconv.FormatBool(noFsync))
	cfg, err := cl.env.Start()
	if err != nil {
		return fmt.Errorf("start kube-apiserver and etcd (KUBEBUILDER_ASSETS=%q): %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // the harness paces itself
	cfg.Timeout = 30 * time.Second
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), v1beta1.AddToScheme(scheme)); err != nil {
		return fmt.Errorf("scheme: %w", err)
	}
	// The ServiceRegistries (a CRD: JSON only) go through the controller-runtime client; pods,
	// nodes, Services and EndpointSlices through the clientset, in protobuf.
	if cl.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	cl.cfg = withProtobuf(cfg)
	if cl.kube, err = kubernetes.NewForConfig(cl.cfg); err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	return nil
}

// withProtobuf copies cfg for built-in types in protobuf, the API server's cheapest encoding
// (creating 20,000 pods, listing them again after a lost watch).
func withProtobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// kubeconfig writes a kubeconfig of an admin user for a component.
func (cl *cluster) kubeconfig(dir, name string) (string, error) {
	user, err := cl.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("add user %s: %w", name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("kubeconfig of %s: %w", name, err)
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

func (cl *cluster) startOperator(ctx context.Context, c *Config) error {
	rep, err := cl.startReplica(ctx, c, "registrar", c.ProfileDir != "")
	if err != nil {
		return err
	}
	cl.operator, cl.metrics, cl.pprof = rep.proc, rep.metrics, rep.pprof
	return nil
}

// replica is one operator process: its metrics and probe addresses (and pprof's, when served).
type replica struct {
	proc                  *process
	metrics, probe, pprof string
}

// startReplica starts an operator process named name (its log, kubeconfig user and work
// files are named so) with extra flags after Config.OperatorArgs, and waits until it answers
// its readiness probe.
func (cl *cluster) startReplica(ctx context.Context, c *Config, name string, pprof bool, extra ...string) (*replica, error) {
	kc, err := cl.kubeconfig(c.WorkDir, name)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, 3)
	for i := range addrs {
		if addrs[i], err = ports.FreeLoopback(); err != nil {
			return nil, err
		}
	}
	rep := &replica{metrics: addrs[0], probe: addrs[1]}
	args := []string{"--kubeconfig=" + kc, "--store-endpoints=" + cl.store.Endpoint(),
		"--leader-elect=false", "--enable-webhook=false",
		"--metrics-bind-address=" + addrs[0], "--health-probe-bind-address=" + addrs[1],
		fmt.Sprintf("--max-concurrent-reconciles=%d", c.Reconciles),
		// Nanosecond timestamps: the log then times a start's stages (manager start, caches
		// synced, workers started) against the harness's kill and the watcher's events.
		"--zap-time-encoding=rfc3339nano"}
	if pprof {
		// Profiles are served only when asked for: off, as in the shipped manifests, the
		// operator does not sample its heap at all (cmd heapProfileRate).
		rep.pprof = addrs[2]
		args = append(args, "--pprof-bind-address="+addrs[2])
	}
	args = append(append(args, c.OperatorArgs...), extra...)
	if rep.proc, err = startProcess(c.WorkDir, name, c.Operator, args...); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := rep.proc.WaitHTTP(ctx, "http://"+addrs[1]+"/readyz"); err != nil {
		rep.proc.Stop(10 * time.Second)
		return nil, err
	}
	return rep, nil
}

// KCMDefaultArgs run only the EndpointSlice controller, with client limits raised from
// kube-controller-manager's defaults (20 QPS, burst 30) so that the comparison measures the
// controller, not a client-side throttle a large cluster would raise too. Its worker count
// (--concurrent-service-endpoint-syncs, default 5, the flag the EndpointSlice controller
// reads) is set to Config.Reconciles, the operator's.
var KCMDefaultArgs = []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}

func (cl *cluster) startKCM(c *Config) error {
	kc, err := cl.kubeconfig(c.WorkDir, "kube-controller-manager")
	if err != nil {
		return err
	}
	serving := []string{"--secure-port=0"}
	if c.kcmMetrics {
		// Its /metrics (workqueue, rest client), on HTTPS with a self-signed certificate and
		// without authentication or authorization for that path: the restart benchmark reads
		// when it has synced and how many API requests it made.
		addr, err := ports.FreeLoopback()
		if err != nil {
			return err
		}
		host, port, _ := strings.Cut(addr, ":")
		cl.kcmMetrics = addr
		serving = []string{"--secure-port=" + port, "--bind-address=" + host, "--cert-dir=" + filepath.Join(c.WorkDir, "kcm-certs"),
			"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"}
	}
	args := append(append([]string{"--kubeconfig=" + kc, "--controllers=endpointslice-controller", "--leader-elect=false"}, serving...),
		append([]string{"--v=1", fmt.Sprintf("--concurrent-service-endpoint-syncs=%d", c.Reconciles)}, c.KCMArgs...)...)
	cl.kcm, err = startProcess(c.WorkDir, "kube-controller-manager", c.ControllerManager, args...)
	return err
}

func (cl *cluster) stop() {
	for _, p := range cl.extra {
		p.Stop(10 * time.Second)
	}
	if cl.operator != nil {
		cl.operator.Stop(10 * time.Second)
	}
	if cl.kcm != nil {
		cl.kcm.Stop(10 * time.Second)
	}
	if cl.storeCli != nil {
		_ = cl.storeCli.Close()
	}
	if cl.store != nil {
		cl.store.Stop()
	}
	if cl.env != nil {
		_ = cl.env.Stop()
	}
}

// repoRoot is the nearest directory upwards holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir || strings.TrimSpace(parent) == "" {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
