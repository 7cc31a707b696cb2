package xds_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	grpcxds "google.golang.org/grpc/xds"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/xds"
)

const (
	timeout = 20 * time.Second
	poll    = 20 * time.Millisecond
)

// backend is a real gRPC server standing in for one pod at ip:port; it answers UnaryCall
// with its pod name, and, when hold is set, holds a call whose response_size is 1 until
// release is closed.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	pod     string
	hold    atomic.Bool
	srv     *grpc.Server
	release chan struct{}
	started chan struct{}
}

func (b *backend) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if req.GetResponseSize() == 1 && b.hold.Load() {
		b.started <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &testgrpc.SimpleResponse{Hostname: b.pod}, nil
}

// startBackends starts one backend per pod name on 127.0.0.<first+i> and one common port.
func startBackends(first int, pods ...string) (port int32, byPod map[string]*backend) {
	GinkgoHelper()
	for attempt := 0; attempt < 20; attempt++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", first))
		Expect(err).NotTo(HaveOccurred())
		port = int32(l.Addr().(*net.TCPAddr).Port)
		listeners := []net.Listener{l}
		ok := true
		for i := 1; i < len(pods); i++ {
			li, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:%d", first+i, port))
			if err != nil {
				ok = false
				break
			}
			listeners = append(listeners, li)
		}
		if !ok {
			for _, li := range listeners {
				_ = li.Close()
			}
			continue
		}
		byPod = map[string]*backend{}
		for i, name := range pods {
			b := &backend{pod: name, srv: grpc.NewServer(), release: make(chan struct{}), started: make(chan struct{}, 1)}
			testgrpc.RegisterTestServiceServer(b.srv, b)
			go func() { _ = b.srv.Serve(listeners[i]) }()
			DeferCleanup(b.srv.Stop)
			byPod[name] = b
		}
		return port, byPod
	}
	Fail("no common free port for the backends")
	return 0, nil
}

// xdsClient is a grpc-go channel to xds:///<target>, with its own xDS client (node id).
func xdsClient(node, target string) testgrpc.TestServiceClient {
	GinkgoHelper()
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": %q}
	}`, xdsAddr, node)
	builder, err := grpcxds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	Expect(err).NotTo(HaveOccurred())
	cc, err := grpc.NewClient("xds:///"+target, grpc.WithResolvers(builder), grpc.WithTransportCredentials(insecure.NewCredentials()))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cc.Close)
	return testgrpc.NewTestServiceClient(cc)
}

// served makes n calls and returns the pods that answered (errors as "error: ...").
func served(c testgrpc.TestServiceClient, n int) map[string]int {
	out := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		cancel()
		if err != nil {
			out["error: "+err.Error()]++
			continue
		}
		out[resp.GetHostname()]++
	}
	return out
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "xds-test-"}}
	Expect(k8sClient.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

func newRegistry(ns, name, app string, port int32) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Ports:    []v1beta1.ServicePort{{Name: "grpc", Port: port}},
		},
	}
	Expect(k8sClient.Create(context.Background(), reg)).To(Succeed())
	DeferCleanup(func() {
		err := k8sClient.Delete(context.Background(), reg)
		if apierrors.IsNotFound(err) {
			return
		}
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(reg), &v1beta1.ServiceRegistry{}))
		}).WithTimeout(timeout).Should(BeTrue())
	})
	return reg
}

// newPod creates a pod held by a finalizer (so that a deletion leaves it terminating, as
// the kubelet would during its grace period) and plays the kubelet with setReady.
func newPod(ns, name, app string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app},
			Finalizers: []string{"test.registrar.dev/hold"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	for _, m := range mutate {
		m(pod)
	}
	Expect(k8sClient.Create(context.Background(), pod)).To(Succeed())
	DeferCleanup(func() {
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &corev1.Pod{}
			if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
				return client.IgnoreNotFound(err)
			}
			cur.Finalizers = nil
			return k8sClient.Update(context.Background(), cur)
		})).To(Succeed())
		_ = client.IgnoreNotFound(k8sClient.Delete(context.Background(), pod, client.GracePeriodSeconds(0)))
	})
	return pod
}

func setReady(pod *corev1.Pod, ip string, ready bool) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodRunning
		cur.Status.PodIP = ip
		cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		cur.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		}
		return k8sClient.Status().Update(context.Background(), cur)
	})).To(Succeed())
}

// published is the health of each pod in the ClusterLoadAssignment the server holds.
func published(name string) map[string]string {
	out := map[string]string{}
	cla := operator.xds.LoadAssignment(name)
	for _, loc := range cla.GetEndpoints() {
		for _, ep := range loc.GetLbEndpoints() {
			pod := ep.GetMetadata().GetFilterMetadata()[xds.MetadataNamespace].GetFields()["pod"].GetStringValue()
			out[pod] = ep.GetHealthStatus().String()
		}
	}
	return out
}

var _ = Describe("xDS server", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("sends RPCs only to registered pods and stops new RPCs to a pod that turns unready", func() {
		port, _ := startBackends(2, "web-1", "web-2", "web-3")
		newRegistry(ns, "web", "web", port)
		p1, p2, p3 := newPod(ns, "web-1", "web"), newPod(ns, "web-2", "web"), newPod(ns, "web-3", "web")
		setReady(p1, "127.0.0.2", true)
		setReady(p2, "127.0.0.3", true)
		setReady(p3, "127.0.0.4", false) // its server listens, but it is not ready
		c := xdsClient("client-a", "web."+ns)

		Eventually(func() []string { return keys(served(c, 20)) }).WithTimeout(timeout).WithPolling(poll).
			Should(ConsistOf("web-1", "web-2"))
		Consistently(func() []string { return keys(served(c, 10)) }).WithTimeout(time.Second).WithPolling(poll).
			Should(ConsistOf("web-1", "web-2"), "the unready pod must never be called")

		setReady(p2, "127.0.0.3", false)
		Eventually(func() []string { return keys(served(c, 20)) }).WithTimeout(timeout).WithPolling(poll).
			Should(ConsistOf("web-1"))
		Expect(published("web." + ns)).To(Equal(map[string]string{"web-1": "HEALTHY"}))

		setReady(p3, "127.0.0.4", true)
		Eventually(func() []string { return keys(served(c, 20)) }).WithTimeout(timeout).WithPolling(poll).
			Should(ConsistOf("web-1", "web-3"))
	})

	It("marks a terminating pod DRAINING: no new RPCs reach it, an in-flight one finishes", func() {
		port, backends := startBackends(12, "api-1", "api-2")
		newRegistry(ns, "api", "api", port)
		p1, p2 := newPod(ns, "api-1", "api"), newPod(ns, "api-2", "api")
		setReady(p1, "127.0.0.12", true)
		setReady(p2, "127.0.0.13", true)
		c := xdsClient("client-b", "api."+ns)
		Eventually(func() []string { return keys(served(c, 20)) }).WithTimeout(timeout).WithPolling(poll).
			Should(ConsistOf("api-1", "api-2"))

		// Start held calls until one is in flight on api-1 (api-2 answers them at once).
		backends["api-1"].hold.Store(true)
		type result struct {
			pod string
			err error
		}
		results := make(chan result, 16)
		var wg sync.WaitGroup
		inFlight := false
		for i := 0; i < 16 && !inFlight; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 1})
				results <- result{resp.GetHostname(), err}
			}()
			select {
			case <-backends["api-1"].started:
				inFlight = true
			case r := <-results: // it reached api-2, which does not hold: try again
				Expect(r.err).NotTo(HaveOccurred())
			case <-time.After(5 * time.Second):
				Fail("a held call reached no backend")
			}
		}
		Expect(inFlight).To(BeTrue(), "no call in flight on api-1")

		Expect(k8sClient.Delete(context.Background(), p1, client.GracePeriodSeconds(30))).To(Succeed())
		Eventually(func() map[string]string { return published("api." + ns) }).WithTimeout(timeout).WithPolling(poll).
			Should(Equal(map[string]string{"api-1": "DRAINING", "api-2": "HEALTHY"}))
		Eventually(func() []string { return keys(served(c, 20)) }).WithTimeout(timeout).WithPolling(poll).
			Should(ConsistOf("api-2"))
		Consistently(func() []string { return keys(served(c, 10)) }).WithTimeout(time.Second).WithPolling(poll).
			Should(ConsistOf("api-2"), "no new RPC may reach the draining pod")

		close(backends["api-1"].release)
		wg.Wait()
		close(results)
		sawDrained := false
		for r := range results {
			Expect(r.err).NotTo(HaveOccurred(), "a call in flight during the drain failed")
			sawDrained = sawDrained || r.pod == "api-1"
		}
		Expect(sawDrained).To(BeTrue(), "the call in flight on the draining pod did not complete there")
	})

	It("keeps clients working across an operator (xDS server) restart", func() {
		port, _ := startBackends(22, "pay-1", "pay-2")
		newRegistry(ns, "pay", "pay", port)
		p1, p2 := newPod(ns, "pay-1", "pay"), newPod(ns, "pay-2", "pay")
		setReady(p1, "127.0.0.22", true)
		setReady(p2, "127.0.0.23", true)
		c := xdsClient("client-c", "pay."+ns)
		Eventually(func() []string { return keys(served(c, 20)) }).WithTimeout(timeout).WithPolling(poll).
			Should(ConsistOf("pay-1", "pay-2"))
		before := operator.xds.VersionPrefix()

		operator.stop()
		// The client keeps its last endpoints while no server answers.
		Expect(keys(served(c, 10))).To(ConsistOf("pay-1", "pay-2"))
		operator = startOperator()
		Expect(operator.xds.VersionPrefix()).NotTo(Equal(before))
		Eventually(func() []string {
			var nodes []string
			for _, cl := range operator.xds.Clients() {
				if len(cl.Acked) == len(xds.TypeURLs) {
					nodes = append(nodes, cl.Node)
				}
			}
			return nodes
		}).WithTimeout(60*time.Second).WithPolling(100*time.Millisecond).Should(ContainElement("client-c"),
			"the client did not reconnect to the new server and acknowledge every type")
		Consistently(func() []string { return keys(served(c, 10)) }).WithTimeout(time.Second).WithPolling(poll).
			Should(ConsistOf("pay-1", "pay-2"))
		// And it follows the new server's decisions.
		setReady(p2, "127.0.0.23", false)
		Eventually(func() []string { return keys(served(c, 20)) }).WithTimeout(timeout).WithPolling(poll).
			Should(ConsistOf("pay-1"))
	})

	// A metadata.name that is no DNS-1123 label needs spec.serviceName (CRD validation), so an
	// invalid resource name cannot come from the API; two registries of one service in one
	// namespace would make one resource name, and the younger is reported and not served
	// (internal/xds unit tests cover invalid names).
	It("reports a registry whose xDS resource name is taken and does not serve it", func() {
		port, _ := startBackends(32, "db-1")
		first := newRegistry(ns, "db", "db", port)
		Eventually(func() *metav1.Condition { return xdsCondition(first) }).WithTimeout(timeout).WithPolling(poll).
			Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("xds:///db."+ns))))
		second := newRegistry(ns, "db-copy", "db-copy", port)
		updateServiceName(second, "db")
		Eventually(func() *metav1.Condition { return xdsCondition(second) }).WithTimeout(timeout).WithPolling(poll).
			Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1beta1.ReasonXDSResourceNameConflict),
				HaveField("Message", ContainSubstring("spec.serviceName"))))
		p := newPod(ns, "db-1", "db")
		setReady(p, "127.0.0.32", true)
		c := xdsClient("client-d", "db."+ns)
		Eventually(func() []string { return keys(served(c, 10)) }).WithTimeout(timeout).WithPolling(poll).Should(ConsistOf("db-1"))
	})
})

func xdsCondition(reg *v1beta1.ServiceRegistry) *metav1.Condition {
	cur := &v1beta1.ServiceRegistry{}
	Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(reg), cur)).To(Succeed())
	return meta.FindStatusCondition(cur.Status.Conditions, v1beta1.ConditionXDSPublished)
}

func updateServiceName(reg *v1beta1.ServiceRegistry, service string) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1beta1.ServiceRegistry{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(reg), cur); err != nil {
			return err
		}
		cur.Spec.ServiceName = service
		return k8sClient.Update(context.Background(), cur)
	})).To(Succeed())
}
