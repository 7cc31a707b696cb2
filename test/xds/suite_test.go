// Package xds_test runs the operator with its xDS server against a real kube-apiserver
// (envtest) and a real etcd store, and real grpc-go xDS clients (google.golang.org/grpc/xds,
// xds:/// targets, bootstrap given as JSON) calling real gRPC servers that stand in for the
// pods on loopback addresses 127.0.0.x. The tests play the kubelet by writing pod status.
// No Envoy binary is available here: Envoy is not tested.
package xds_test

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller"
	opsetup "github.com/registrar-dev/registrar/internal/controller/operator"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/internal/warmup"
	"github.com/registrar-dev/registrar/internal/xds"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

const storePrefix = "/registrar/services"

// gateAckTimeout is the operator's --xds-gate-ack-timeout in this suite.
const gateAckTimeout = 6 * time.Second

var (
	testEnv     *envtest.Environment
	restCfg     *rest.Config
	scheme      *runtime.Scheme
	k8sClient   client.Client
	storeServer *etcdtest.Server
	operator    *runningOperator
	// xdsAddr is the xDS server's address; a restarted operator listens on the same one, as
	// a new leader behind the same Service would.
	xdsAddr string
)

func TestXDS(t *testing.T) {
	if os.Getenv(benchClientsEnv) != "" {
		// The benchmark's client process (bench_test.go), not the suite.
		if err := runBenchClients(); err != nil {
			t.Fatal(err)
		}
		return
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "xDS Suite")
}

var _ = BeforeSuite(func() {
	if os.Getenv("XDS_BENCH_OUT") != "" {
		// The benchmark logs as the command does by default: info level, JSON.
		logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	} else {
		logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	}
	env, err := testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	testEnv, restCfg, k8sClient, scheme = env.Environment, env.Config, env.Client, env.Scheme
	storeServer, err = etcdtest.Start(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	xdsAddr, err = ports.FreeLoopback()
	Expect(err).NotTo(HaveOccurred())
	operator = startOperator()
})

var _ = AfterSuite(func() {
	if operator != nil {
		operator.stop()
	}
	if storeServer != nil {
		storeServer.Stop()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// runningOperator is the operator's manager, with its xDS server, running in this process.
type runningOperator struct {
	cancel context.CancelFunc
	done   chan struct{}
	xds    *xds.Server
	cache  cache.Cache   // the manager's informers (the benchmark times its pod events)
	store  *holdingStore // the etcd store, with a hook that holds writes (order_test.go)
}

// startOperator starts a manager wired like cmd/main.go with --xds-bind-address=xdsAddr.
func startOperator() *runningOperator {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: opsetup.CacheByObject()},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{storeServer.Endpoint()}})
	Expect(err).NotTo(HaveOccurred())
	srv := xds.New(xds.Config{
		BindAddress: xdsAddr,
		// The bench's clients all connect from 127.0.0.1 (--xds-max-streams-per-peer).
		MaxStreamsPerPeer: 2 * benchClients,
		Expected: func(ctx context.Context) ([]types.NamespacedName, error) {
			var list v1beta1.ServiceRegistryList
			if err := mgr.GetClient().List(ctx, &list); err != nil {
				return nil, err
			}
			keys := make([]types.NamespacedName, len(list.Items))
			for i := range list.Items {
				keys[i] = client.ObjectKeyFromObject(&list.Items[i])
			}
			return keys, nil
		},
		Log:         ctrl.Log.WithName("xds"),
		OnAck:       bench.ack,
		OnPublished: bench.published,
	})
	Expect(mgr.Add(srv)).To(Succeed())
	st := newHoldingStore(etcdstore.New(cli, etcdstore.Options{Prefix: storePrefix, Timeout: 2 * time.Second}))
	stores, err := multi.New([]multi.Named{{Name: "etcd", Store: st}}, []string{"etcd"})
	Expect(err).NotTo(HaveOccurred())
	// The command's defaults (cmd/main.go's flags; retry backoff as controller.Options
	// defaults it), so the specs and the benchmark measure the operator as it ships.
	_, err = opsetup.Setup(mgr, opsetup.Config{
		Stores:    stores,
		StoreName: storeServer.Endpoint(),
		Recorder:  mgr.GetEventRecorder("registrar"),
		Clock:     clock.RealClock{},
		Warmup:    &warmup.Runner{Client: &http.Client{}, Clock: clock.RealClock{}},
		Publisher: srv,
		// Gated pods wait for the subscribed clients' ACKs (gateacks_test.go); the other
		// specs' pods have no gate.
		XDSGateAckTimeout: gateAckTimeout,
		Options: controller.Options{
			MaxConcurrentReconciles: opsetup.DefaultMaxConcurrentReconciles,
			MaxConcurrentWarmups:    opsetup.DefaultMaxConcurrentWarmups,
		},
	})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	op := &runningOperator{cancel: cancel, done: make(chan struct{}), xds: srv, cache: mgr.GetCache(), store: st}
	go func() {
		defer GinkgoRecover()
		defer close(op.done)
		Expect(mgr.Start(ctx)).To(Succeed())
		_ = cli.Close()
	}()
	Eventually(srv.Listening()).WithTimeout(60 * time.Second).Should(BeClosed())
	return op
}

func (o *runningOperator) stop() {
	o.cancel()
	Eventually(o.done).WithTimeout(30 * time.Second).Should(BeClosed())
}
