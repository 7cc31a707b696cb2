// Package multicluster_test runs several clusters against one shared etcd store, as
// --store-shared wires them: two independent control planes (envtest: a kube-apiserver and
// its etcd each), one registrar per cluster (an in-process manager wired like cmd/ with
// --store-shared --cluster-id --store-lease-ttl), each reaching the shared store through its
// own TCP proxy (test/support/netproxy) so that one cluster alone can be partitioned.
//
// Every mutation a registrar sends is recorded by its store client (auditKV), and a separate
// client watches the whole prefix (storeWatch): the suite checks that no cluster ever
// writes or deletes another cluster's keys, and that every endpoint written carries its
// cluster's own lease.
//
// Each registrar also runs its xDS server with the follower of the other clusters' records
// (--xds-bind-address with --store-shared): a real grpc-go xDS client of east's server fails
// over to west's pods at priority 1 (xds_test.go).
//
// The short variant (make test) checks isolation, churn in both clusters and the identity
// clash; MULTICLUSTER_FULL=1 (make test-multicluster) adds the partition and the operator
// killed for longer than the TTL.
package multicluster_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller"
	opsetup "github.com/registrar-dev/registrar/internal/controller/operator"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/internal/warmup"
	"github.com/registrar-dev/registrar/internal/xds"
	"github.com/registrar-dev/registrar/internal/xds/remote"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/netproxy"
	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

const (
	storePrefix = "/registrar/services"
	leaseTTL    = 8 * time.Second
	timeout     = 30 * time.Second
	poll        = 50 * time.Millisecond
	// ns is the namespace every cluster publishes service "web" from.
	ns = "shop"
)

var (
	full        = os.Getenv("MULTICLUSTER_FULL") != ""
	storeServer *etcdtest.Server
	storeClient *clientv3.Client
	watch       *storeWatch
	// clusters by ID: "east" and "west".
	clusters = map[string]*member{}
)

// member is one cluster: its control plane, its proxy to the shared store, its registrar.
type member struct {
	id    string
	env   *testenv.Env
	proxy *netproxy.Proxy
	op    *operator
}

func TestMultiCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Multi-cluster Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	storeServer, err = etcdtest.Start(filepath.Join(GinkgoT().TempDir(), "store"))
	Expect(err).NotTo(HaveOccurred())
	storeClient, err = storeServer.Client()
	Expect(err).NotTo(HaveOccurred())
	watch = startWatch(storeClient)
	for _, id := range []string{"east", "west"} {
		env, err := testenv.Start(testenv.Options{})
		Expect(err).NotTo(HaveOccurred())
		proxy, err := netproxy.New(hostPort(storeServer.Endpoint()))
		Expect(err).NotTo(HaveOccurred())
		m := &member{id: id, env: env, proxy: proxy}
		clusters[id] = m
		for _, n := range []string{ns, "clash"} {
			Expect(env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
		}
		m.op = startOperator(m, id, "inst-"+id, ns)
	}
})

var _ = AfterSuite(func() {
	for _, m := range clusters {
		if m.op != nil {
			m.op.kill()
		}
		m.proxy.Close()
		if m.env != nil {
			Expect(m.env.Stop()).To(Succeed())
		}
	}
	if watch != nil {
		watch.stop()
	}
	if storeClient != nil {
		_ = storeClient.Close()
	}
	if storeServer != nil {
		storeServer.Stop()
	}
})

// operator is one in-process registrar.
type operator struct {
	cluster, installation string
	audit                 *auditKV
	store                 *etcdstore.Store
	// xds is the registrar's xDS server (--xds-bind-address, --xds-remote-localities on:
	// it serves the other clusters' records of the shared store at priority 1).
	xds    *xds.Server
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startOperator wires a registrar like cmd/ does with --store-shared --cluster-id=cluster
// --store-lease-ttl, its installation identity given, watching namespace only, reaching
// the store through m's proxy.
func startOperator(m *member, cluster, installation, namespace string) *operator {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(m.env.Config, ctrl.Options{
		Scheme:                 m.env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	})
	Expect(err).NotTo(HaveOccurred())
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{"http://" + m.proxy.Addr}, DialTimeout: 2 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	audit := newAuditKV(cli, cluster)
	fence := fence.NewCluster(audit, storePrefix, cluster, installation, installation+"-leader", 2*time.Second)
	Expect(mgr.Add(fence)).To(Succeed())
	// As cmd/: the store's return and the loss of the endpoint lease resync every registry.
	recovered := make(chan ctrlevent.GenericEvent, 1)
	resync := func() {
		select {
		case recovered <- ctrlevent.GenericEvent{Object: &v1beta1.ServiceRegistry{}}:
		default:
		}
	}
	s := etcdstore.New(audit, etcdstore.Options{
		Prefix: storePrefix, Timeout: 2 * time.Second, Fence: fence, Cluster: cluster,
		LeaseTTL: leaseTTL, Leases: cli, OnRecover: resync, OnLeaseLost: resync,
	})
	Expect(mgr.Add(s)).To(Succeed())
	Expect(mgr.Add(etcdstore.LeaseKeeper{Store: s})).To(Succeed())
	stores, err := multi.New([]multi.Named{{Name: "etcd", Store: s}}, []string{"etcd"})
	Expect(err).NotTo(HaveOccurred())
	// As cmd/ with --xds-bind-address and --store-shared: the xDS server, fed by the
	// reconciles and by the read-only follower of the other clusters' records.
	xdsAddr, err := ports.FreeLoopback()
	Expect(err).NotTo(HaveOccurred())
	follower := remote.New(remote.Config{
		Store: cli, Prefix: storePrefix, Cluster: cluster,
		Log: ctrl.Log.WithName("xds-remote").WithValues("cluster", cluster),
	})
	xsrv := xds.New(xds.Config{
		BindAddress: xdsAddr, RemoteSynced: follower.Synced(),
		Log: ctrl.Log.WithName("xds").WithValues("cluster", cluster),
	})
	follower.SetSink(xsrv)
	Expect(mgr.Add(xsrv)).To(Succeed())
	Expect(mgr.Add(follower)).To(Succeed())
	_, err = opsetup.Setup(mgr, opsetup.Config{
		Publisher: xsrv,
		Stores:    stores, StoreName: "etcd",
		Recorder: mgr.GetEventRecorder("registrar"), Clock: clock.RealClock{}, Cluster: cluster,
		Warmup:             &warmup.Runner{Client: &http.Client{}, Clock: clock.RealClock{}},
		CallerCacheSeconds: 5,
		Options: controller.Options{
			MaxConcurrentReconciles: 4, RetryBase: 50 * time.Millisecond, RetryMax: time.Second, MaxConcurrentWarmups: 4,
			ResyncInterval: 5 * time.Second, StoreRecovered: recovered,
		},
	})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{cluster: cluster, installation: installation, audit: audit, store: s, xds: xsrv, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(op.done)
		defer func() { _ = cli.Close() }() // as a dead process: its lease is no longer kept alive
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return op
}

// kill stops the registrar without any goodbye: no key is deleted, its lease is simply no
// longer kept alive (the client closes as a dead process's connection would).
func (o *operator) kill() {
	o.once.Do(func() {
		o.cancel()
		Eventually(o.done).WithTimeout(30 * time.Second).Should(BeClosed())
	})
}
