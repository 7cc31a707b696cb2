package controller_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

	"github.com/registrar-dev/registrar/internal/controller"
	opsetup "github.com/registrar-dev/registrar/internal/controller/operator"
	"github.com/registrar-dev/registrar/internal/eventqueue"
	"github.com/registrar-dev/registrar/internal/leaseguard"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/store"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/internal/warmup"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

// The suite runs one real kube-apiserver + etcd (envtest) for Kubernetes, one real etcd
// process as the store, and the operator in-process. Assertions read the API server through
// k8sClient (no cache) and the store through storeClient (a separate etcd client).
var (
	testEnv     *envtest.Environment
	restCfg     *rest.Config
	scheme      *runtime.Scheme
	k8sClient   client.Client
	storeServer *etcdtest.Server
	storeClient *clientv3.Client
	operator    *runningOperator
	// metricsAddr is where the operator serves /metrics (a free loopback port).
	metricsAddr string
)

const storePrefix = "/registrar/services"

func TestController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	env, err := testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	testEnv, restCfg, k8sClient, scheme = env.Environment, env.Config, env.Client, env.Scheme

	storeServer, err = etcdtest.Start(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	storeClient, err = storeServer.Client()
	Expect(err).NotTo(HaveOccurred())

	metricsAddr, err = ports.FreeLoopback()
	Expect(err).NotTo(HaveOccurred())
	operator = startOperator()
})

var _ = AfterSuite(func() {
	if operator != nil {
		operator.stop()
	}
	if storeClient != nil {
		_ = storeClient.Close()
	}
	if storeServer != nil {
		storeServer.Stop()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// runningOperator is the operator's manager running in this process.
type runningOperator struct {
	cancel context.CancelFunc
	done   chan struct{}
	etcd   *clientv3.Client
	r      *controller.ServiceRegistryReconciler
}

// startOperator starts a manager wired like cmd/main.go, against the suite's store.
func startOperator() *runningOperator {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: opsetup.CacheByObject()},
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{storeServer.Endpoint()}})
	Expect(err).NotTo(HaveOccurred())
	events := eventqueue.New(eventqueue.Config{Scheme: mgr.GetScheme(), Controller: "registrar",
		Create: eventqueue.ClientCreate(mgr.GetClient()), OnDrop: metrics.EventDropped})
	Expect(mgr.Add(events)).To(Succeed())
	// The store as cmd builds it (etcdstore.NewOperator): every transaction guarded by the
	// installation's write fence, taken here as the leader takes it.
	installFence := fence.New(cli, fence.Key(storePrefix, "registrar-system"), "controller-suite", 2*time.Second)
	Expect(installFence.Acquire(context.Background())).To(Succeed())
	etcdStore, err := etcdstore.NewOperator(cli, installFence, etcdstore.Options{Prefix: storePrefix, Timeout: 2 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	// One named store, as cmd builds --stores=etcd.
	stores, err := multi.New([]multi.Named{{Name: "etcd", Store: store.Instrumented(etcdStore, metrics.ObserveStore)}}, []string{"etcd"})
	Expect(err).NotTo(HaveOccurred())
	ctrls, err := opsetup.Setup(mgr, opsetup.Config{
		Stores:    stores,
		StoreName: storeServer.Endpoint(),
		Recorder:  events,
		Clock:     clock.RealClock{},
		Cluster:   "test-cluster",
		Warmup: &warmup.Runner{
			Client: &http.Client{}, Clock: clock.RealClock{}, RetryPause: 20 * time.Millisecond,
		},
		CallerCacheSeconds: 5,
		NodeLeaseTimeout:   20 * time.Second,
		LeaseGuard:         leaseguard.DefaultConfig(),
		Options: controller.Options{
			MaxConcurrentReconciles: 4, RetryBase: 50 * time.Millisecond, RetryMax: 2 * time.Second,
			MaxConcurrentWarmups: 16,
		},
	})
	Expect(err).NotTo(HaveOccurred())
	r := ctrls.Registry
	ctx, cancel := context.WithCancel(context.Background())
	op := &runningOperator{cancel: cancel, done: make(chan struct{}), etcd: cli, r: r}
	go func() {
		defer GinkgoRecover()
		defer close(op.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return op
}

func (o *runningOperator) stop() {
	o.cancel()
	Eventually(o.done).WithTimeout(30 * time.Second).Should(BeClosed())
	_ = o.etcd.Close()
}

// newNamespace creates a namespace of the test's own.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "reg-test-"}}
	Expect(k8sClient.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}
