// Package multistore_test runs the operator against a real kube-apiserver (envtest) with two
// stores configured at once, as `--stores=etcd,coredns` wires them: the etcd store in one
// etcd, and SkyDNS records in a second etcd that a real CoreDNS serves. Callers are played by
// a separate etcd client and a DNS client.
package multistore_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	"github.com/registrar-dev/registrar/internal/controller/operator"
	corednsstore "github.com/registrar-dev/registrar/internal/store/coredns"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/internal/warmup"
	"github.com/registrar-dev/registrar/test/support/corednstest"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

const (
	zone        = "registrar.test"
	storePrefix = "/registrar/services"
	dnsTTL      = 5 * time.Second
)

var (
	testEnv   *envtest.Environment
	restCfg   *rest.Config
	scheme    *runtime.Scheme
	k8sClient client.Client
	// storeServer holds the etcd store; dnsEtcd the SkyDNS records CoreDNS serves.
	storeServer, dnsEtcd *etcdtest.Server
	storeClient          *clientv3.Client
	dnsServer            *corednstest.Server
	stopOperator         context.CancelFunc
	operatorDone         chan struct{}
)

func TestMultiStore(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Multi-store Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	env, err := testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	testEnv, restCfg, k8sClient, scheme = env.Environment, env.Config, env.Client, env.Scheme

	dir := GinkgoT().TempDir()
	storeServer, err = etcdtest.Start(filepath.Join(dir, "store"))
	Expect(err).NotTo(HaveOccurred())
	storeClient, err = storeServer.Client()
	Expect(err).NotTo(HaveOccurred())
	dnsEtcd, err = etcdtest.Start(filepath.Join(dir, "dns"))
	Expect(err).NotTo(HaveOccurred())
	dnsServer, err = corednstest.Start(dir, zone, corednsstore.DefaultPrefix, dnsEtcd.Endpoint())
	Expect(err).NotTo(HaveOccurred(), "CoreDNS: run hack/coredns.sh (make test does)")
	startOperator()
})

var _ = AfterSuite(func() {
	if stopOperator != nil {
		stopOperator()
		Eventually(operatorDone).WithTimeout(30 * time.Second).Should(BeClosed())
	}
	for _, stop := range []func(){
		func() { _ = storeClient.Close() }, dnsServer.Stop, dnsEtcd.Stop, storeServer.Stop,
	} {
		func() { defer func() { _ = recover() }(); stop() }() // whatever started
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// startOperator wires the reconciler like cmd/ does for --stores=etcd,coredns with
// --coredns-etcd-endpoints set, except that the default stores are etcd alone, so that each
// test names its stores in spec.stores.
func startOperator() {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: operator.CacheByObject()},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	etcdCli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{storeServer.Endpoint()}})
	Expect(err).NotTo(HaveOccurred())
	dnsCli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{dnsEtcd.Endpoint()}})
	Expect(err).NotTo(HaveOccurred())
	stores, err := multi.New([]multi.Named{
		{Name: "etcd", Store: etcdstore.New(etcdCli, etcdstore.Options{Prefix: storePrefix, Timeout: 2 * time.Second})},
		{Name: "coredns", Store: corednsstore.New(dnsCli, corednsstore.Options{Zone: zone, TTL: dnsTTL, Timeout: 2 * time.Second})},
	}, []string{"etcd"})
	Expect(err).NotTo(HaveOccurred())
	_, err = operator.Setup(mgr, operator.Config{
		Stores: stores, StoreName: "etcd, coredns",
		Recorder: mgr.GetEventRecorder("registrar"), Clock: clock.RealClock{}, Cluster: "test",
		Warmup:             &warmup.Runner{Client: &http.Client{}, Clock: clock.RealClock{}},
		CallerCacheSeconds: 5,
		Options: controller.Options{
			MaxConcurrentReconciles: 4, RetryBase: 50 * time.Millisecond, RetryMax: time.Second, MaxConcurrentWarmups: 4,
		},
	})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	stopOperator, operatorDone = cancel, make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(operatorDone)
		defer func() { _ = etcdCli.Close(); _ = dnsCli.Close() }()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
}
