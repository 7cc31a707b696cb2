package controller_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

var _ = Describe("Readiness choreography", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace()
	})

	It("warms a gated pod up, registers it, and only then sets its gate True", func() {
		srv := startPodServer("127.0.0.2", http.StatusOK, 0)
		reg := newGatedRegistry(ns, "web", v1beta1.WarmupSpec{
			Paths: []string{"/warm", "/cache"}, Requests: 6, Concurrency: 2,
			MinDurationMillis: ptr.To[int32](300),
		})
		gates := watchGates(ns, "web")
		puts := recordPuts(key("web", ns, ""), nil)

		pod := gatedPod(ns, "web-1", srv)
		// The warm-up's minDuration runs from its start, which is after the pod turned ready
		// but before the server receives the first request: only readyAt bounds it soundly.
		readyAt := time.Now()
		setPodStatus(pod, corev1.PodRunning, srv.ip, true)

		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Eventually(gates.trueAt("web-1")).WithTimeout(timeout).ShouldNot(BeZero())
		Expect(gates.violations()).To(BeEmpty())
		Expect(srv.count()).To(Equal(6), "warm-up requests received")
		Expect(srv.paths()).To(Equal(map[string]int{"/warm": 3, "/cache": 3}))
		put := puts.at(key("web", ns, "web-1"))
		Expect(put).To(BeTemporally(">=", srv.last()), "endpoint written before the last warm-up request")
		Expect(put).To(BeTemporally(">=", readyAt.Add(300*time.Millisecond)), "endpoint written before minDuration")
		AddReportEntry("warm-up to registered", put.Sub(srv.first()).String())

		Expect(gateOf(pod)).To(And(HaveField("Status", corev1.ConditionTrue), HaveField("Reason", v1beta1.GateRegistered)))
		Consistently(srv.count).WithTimeout(500*time.Millisecond).Should(Equal(6), "warmed up twice")
		Eventually(func() v1beta1.EndpointState { return endpointState(reg, "web-1") }).
			WithTimeout(timeout).Should(Equal(v1beta1.EndpointRegistered))
		Eventually(podEventReasons(ns, "web-1")).WithTimeout(timeout).Should(ContainElements("WarmedUp", "Registered"))
	})

	It("keeps the gate False and the store empty when warm-up fails under onFailure=Block", func() {
		srv := startPodServer("127.0.0.3", http.StatusServiceUnavailable, 0)
		reg := newGatedRegistry(ns, "web", v1beta1.WarmupSpec{
			Paths: []string{"/warm"}, Requests: 3, Concurrency: 1, OnFailure: v1beta1.WarmupBlock,
			TimeoutMillis: 700,
		})
		gates := watchGates(ns, "web")
		pod := gatedPod(ns, "web-1", srv)
		setPodStatus(pod, corev1.PodRunning, srv.ip, true)

		Eventually(func() string { return gateOf(pod).Reason }).WithTimeout(timeout).Should(Equal(v1beta1.GateWarmupFailed))
		Expect(gateOf(pod).Status).To(Equal(corev1.ConditionFalse))
		Expect(srv.count()).To(BeNumerically(">", 0))
		Consistently(func() []string { return storedPods("web", ns) }).WithTimeout(time.Second).Should(BeEmpty())
		Expect(gates.trueAt("web-1")()).To(BeZero(), "gate turned True after a blocked warm-up")
		Expect(endpointState(reg, "web-1")).To(Equal(v1beta1.EndpointPending))
		Eventually(podEventReasons(ns, "web-1")).WithTimeout(timeout).Should(ContainElement("WarmupFailed"))
	})

	It("registers after the warm-up timeout under onFailure=Proceed, with a Warning event", func() {
		srv := startPodServer("127.0.0.4", http.StatusInternalServerError, 0)
		newGatedRegistry(ns, "web", v1beta1.WarmupSpec{
			Paths: []string{"/warm"}, Requests: 3, Concurrency: 1, OnFailure: v1beta1.WarmupProceed,
			TimeoutMillis: 500,
		})
		pod := gatedPod(ns, "web-1", srv)
		setPodStatus(pod, corev1.PodRunning, srv.ip, true)

		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Eventually(func() corev1.ConditionStatus { return gateOf(pod).Status }).WithTimeout(timeout).Should(Equal(corev1.ConditionTrue))
		Eventually(podEventReasons(ns, "web-1")).WithTimeout(timeout).Should(ContainElement("WarmupFailed"))
	})

	It("stops a warm-up when its pod is deleted", func() {
		srv := startPodServer("127.0.0.5", http.StatusOK, 20*time.Millisecond)
		newGatedRegistry(ns, "web", v1beta1.WarmupSpec{Paths: []string{"/warm"}, Requests: 10000, Concurrency: 1})
		pod := gatedPod(ns, "web-1", srv)
		setPodStatus(pod, corev1.PodRunning, srv.ip, true)
		Eventually(srv.count).WithTimeout(timeout).Should(BeNumerically(">=", 3))

		deletePodNow(pod)
		// A running warm-up sends a request every ~20 ms: a count unchanged over one 200 ms
		// poll means it stopped.
		last := -1
		Eventually(func() bool {
			c := srv.count()
			stopped := c == last
			last = c
			return stopped
		}).WithTimeout(timeout).WithPolling(200*time.Millisecond).Should(BeTrue(), "warm-up requests kept coming after the pod was deleted")
		Consistently(srv.count).WithTimeout(500*time.Millisecond).Should(Equal(last), "warm-up requests resumed")
		Expect(storedPods("web", ns)).To(BeEmpty())
	})

	It("does not warm up again a pod whose gate is already True", func() {
		srv := startPodServer("127.0.0.6", http.StatusOK, 0)
		newGatedRegistry(ns, "web", v1beta1.WarmupSpec{Paths: []string{"/warm"}, Requests: 5, Concurrency: 1})
		pod := gatedPod(ns, "web-1", srv)
		setPodStatus(pod, corev1.PodRunning, srv.ip, true, gateCondition(corev1.ConditionTrue, v1beta1.GateRegistered))

		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Consistently(srv.count).WithTimeout(time.Second).Should(BeZero())
	})

	It("drops the gate when containers stop being ready, and warms up again before re-registering", func() {
		srv := startPodServer("127.0.0.7", http.StatusOK, 0)
		newGatedRegistry(ns, "web", v1beta1.WarmupSpec{Paths: []string{"/warm"}, Requests: 2, Concurrency: 1})
		pod := gatedPod(ns, "web-1", srv)
		setPodStatus(pod, corev1.PodRunning, srv.ip, true)
		Eventually(func() corev1.ConditionStatus { return gateOf(pod).Status }).WithTimeout(timeout).Should(Equal(corev1.ConditionTrue))

		setPodStatus(pod, corev1.PodRunning, srv.ip, false)
		eventuallyStored("web", ns).Should(BeEmpty())
		Eventually(func() string { return gateOf(pod).Reason }).WithTimeout(timeout).Should(Equal(v1beta1.GateNotReady))

		setPodStatus(pod, corev1.PodRunning, srv.ip, true)
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Expect(srv.count()).To(Equal(4), "warm-up requests over two starts")
		Eventually(func() corev1.ConditionStatus { return gateOf(pod).Status }).WithTimeout(timeout).Should(Equal(corev1.ConditionTrue))
	})

	It("deregisters a terminating pod at once and reports its drain window", func() {
		reg := newRegistry(ns, "web", "web")
		updateRegistry(reg, func(r *v1beta1.ServiceRegistry) {
			r.Spec.Drain = &v1beta1.DrainSpec{Seconds: ptr.To[int32](2), CallerCacheSeconds: ptr.To[int32](10)}
		})
		pod := readyPod(ns, "web-1", web, "10.0.0.1", func(p *corev1.Pod) {
			p.Finalizers = []string{"test.registrar.dev/hold"}
		})
		DeferCleanup(func() {
			patch := client.MergeFrom(pod.DeepCopy())
			pod.Finalizers = nil
			Expect(client.IgnoreNotFound(k8sClient.Patch(context.Background(), pod, patch))).To(Succeed())
		})
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))

		lag := watchDeletion(key("web", ns, "web-1"))
		Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(30))).To(Succeed())
		eventuallyStored("web", ns).Should(BeEmpty())
		AddReportEntry("delete to deregistered", (<-lag).String())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})).To(Succeed(), "pod gone before the drain")

		Eventually(func(g Gomega) {
			st := getRegistry(reg).Status
			g.Expect(st.Endpoints).To(HaveLen(1))
			g.Expect(st.Endpoints[0].State).To(Equal(v1beta1.EndpointDraining))
			g.Expect(st.Endpoints[0].DrainUntil).NotTo(BeNil())
			g.Expect(st.Draining).To(Equal(int32(1)))
			g.Expect(st.Drain).NotTo(BeNil())
			g.Expect(st.Drain.RecommendedSeconds).To(BeNumerically(">=", 10))
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(condition(reg, v1beta1.ConditionDrainSufficient)).WithTimeout(timeout).
			Should(And(haveCondition(metav1.ConditionFalse, "DrainTooShort"), HaveField("Message", ContainSubstring("at least"))))
		Eventually(podEventReasons(ns, "web-1")).WithTimeout(timeout).Should(ContainElement("Deregistered"))
	})

	It("scales 1→50→0 keeping the store equal to warmed-up pods and gates behind the store", func() {
		const n = 50
		newGatedRegistry(ns, "web", v1beta1.WarmupSpec{Paths: []string{"/warm"}, Requests: 3, Concurrency: 1})
		gates := watchGates(ns, "web")
		servers := map[string]*podServer{}
		for i := range n {
			servers[fmt.Sprintf("web-%02d", i)] = startPodServer(fmt.Sprintf("127.0.1.%d", i+1), http.StatusOK, 0)
		}
		puts := recordPuts(key("web", ns, ""), func(pod string) error {
			if c := servers[pod].count(); c < 3 {
				return fmt.Errorf("%s written after %d of 3 warm-up requests", pod, c)
			}
			return nil
		})
		pods := make([]*corev1.Pod, n)
		for i := range n {
			name := fmt.Sprintf("web-%02d", i)
			pods[i] = gatedPod(ns, name, servers[name])
			setPodStatus(pods[i], corev1.PodRunning, servers[name].ip, true)
		}
		Eventually(func() []string { return storedPods("web", ns) }).WithTimeout(3 * timeout).Should(HaveLen(n))
		Eventually(gates.countTrue).WithTimeout(3 * timeout).Should(Equal(n))

		for _, p := range pods {
			deletePodNow(p)
		}
		Eventually(func() []string { return storedPods("web", ns) }).WithTimeout(3 * timeout).Should(BeEmpty())
		Expect(puts.violations()).To(BeEmpty())
		Expect(gates.violations()).To(BeEmpty())
	})
})

// newGatedRegistry creates a registry selecting app=web whose "http" port is each pod's
// container port named "http", with the given warm-up.
func newGatedRegistry(ns, name string, w v1beta1.WarmupSpec) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: web},
			Ports:    []v1beta1.ServicePort{{Name: "http", TargetPort: "http"}},
			Warmup:   &w,
		},
	}
	Expect(k8sClient.Create(context.Background(), reg)).To(Succeed())
	DeferCleanup(deleteRegistry, reg)
	return reg
}

// gatedPod creates a pod with registrar's readiness gate whose "http" port is srv's.
func gatedPod(ns, name string, srv *podServer) *corev1.Pod {
	GinkgoHelper()
	return newPod(ns, name, web, func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
			corev1.ContainerPort{Name: "http", ContainerPort: int32(srv.port)})
	})
}

func gateCondition(status corev1.ConditionStatus, reason string) *corev1.PodCondition {
	return &corev1.PodCondition{Type: v1beta1.ReadinessGate, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}
}

// gateOf reads the pod's registrar.dev/ready condition from the API server (zero if absent).
func gateOf(pod *corev1.Pod) *corev1.PodCondition {
	GinkgoHelper()
	cur := &corev1.Pod{}
	Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), cur)).To(Succeed())
	for _, c := range cur.Status.Conditions {
		if c.Type == v1beta1.ReadinessGate {
			return &c
		}
	}
	return &corev1.PodCondition{}
}

func endpointState(reg *v1beta1.ServiceRegistry, pod string) v1beta1.EndpointState {
	for _, e := range getRegistry(reg).Status.Endpoints {
		if e.Pod == pod {
			return e.State
		}
	}
	return ""
}

// podEventReasons lists the reasons of events.k8s.io Events about a pod.
func podEventReasons(ns, pod string) func() []string {
	return func() []string {
		var list eventsv1.EventList
		Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pod" && e.Regarding.Name == pod {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}
}

// podServer is a local HTTP server standing in for a pod: it counts warm-up requests.
type podServer struct {
	ip     string
	port   int
	status int
	delay  time.Duration
	mu     sync.Mutex
	times  []time.Time
	byPath map[string]int
}

func startPodServer(ip string, status int, delay time.Duration) *podServer {
	GinkgoHelper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	Expect(err).NotTo(HaveOccurred())
	s := &podServer{ip: ip, port: ln.Addr().(*net.TCPAddr).Port, status: status, delay: delay, byPath: map[string]int{}}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	DeferCleanup(srv.Close)
	return s
}

func (s *podServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.times = append(s.times, time.Now())
	s.byPath[r.URL.Path]++
	s.mu.Unlock()
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return
		}
	}
	w.WriteHeader(s.status)
}

func (s *podServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.times)
}

func (s *podServer) paths() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for p, n := range s.byPath {
		out[p] = n
	}
	return out
}

func (s *podServer) first() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.times[0]
}

func (s *podServer) last() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.times[len(s.times)-1]
}

// putRecorder records when a separate etcd watcher saw each key put, and runs check on
// every put to a pod's key.
type putRecorder struct {
	mu     sync.Mutex
	times  map[string]time.Time
	errs   []string
	check  func(pod string) error
	prefix string
}

func recordPuts(prefix string, check func(pod string) error) *putRecorder {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	wch := storeClient.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	Expect((<-wch).Created).To(BeTrue(), "store watch not established")
	p := &putRecorder{times: map[string]time.Time{}, prefix: prefix, check: check}
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				p.observe(string(ev.Kv.Key), time.Now())
			}
		}
	}()
	return p
}

func (p *putRecorder) observe(k string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, seen := p.times[k]; !seen {
		p.times[k] = at
	}
	if p.check != nil {
		if err := p.check(k[len(p.prefix)+1:]); err != nil {
			p.errs = append(p.errs, err.Error())
		}
	}
}

func (p *putRecorder) at(k string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.times[k]
}

func (p *putRecorder) violations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// gateWatcher watches the namespace's pods and, the moment a pod's gate turns True, reads
// the store: an absent endpoint is a violation of the store-acknowledged gate.
type gateWatcher struct {
	mu      sync.Mutex
	flipped map[string]time.Time
	errs    []string
}

func watchGates(ns, service string) *gateWatcher {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	wc, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	g := &gateWatcher{flipped: map[string]time.Time{}}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if pod, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type != watch.Deleted {
					g.observe(ctx, service, pod)
				}
			}
		}
	}()
	return g
}

func (g *gateWatcher) observe(ctx context.Context, service string, pod *corev1.Pod) {
	var isTrue bool
	for _, c := range pod.Status.Conditions {
		isTrue = isTrue || (c.Type == v1beta1.ReadinessGate && c.Status == corev1.ConditionTrue)
	}
	g.mu.Lock()
	_, seen := g.flipped[pod.Name]
	g.mu.Unlock()
	if !isTrue || seen {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := storeClient.Get(rctx, key(service, pod.Namespace, pod.Name))
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flipped[pod.Name] = time.Now()
	if err != nil || len(resp.Kvs) == 0 {
		g.errs = append(g.errs, fmt.Sprintf("gate of %s True while the store has no endpoint (err %v)", pod.Name, err))
	}
}

func (g *gateWatcher) trueAt(pod string) func() time.Time {
	return func() time.Time {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.flipped[pod]
	}
}

func (g *gateWatcher) countTrue() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.flipped)
}

func (g *gateWatcher) violations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.errs...)
}
