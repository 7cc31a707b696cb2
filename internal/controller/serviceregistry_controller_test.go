package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller"
	"github.com/registrar-dev/registrar/internal/controller/regcache"
	"github.com/registrar-dev/registrar/internal/store"
)

var web = map[string]string{"app": "web"}

var _ = Describe("ServiceRegistry", func() {
	var (
		ctx context.Context
		ns  string
		reg *v1beta1.ServiceRegistry
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace()
		reg = newRegistry(ns, "web", "web")
	})

	It("registers a ready pod with the contract's key and value, and reports it in status", func() {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-",
			Labels: map[string]string{regcache.ZoneLabel: "zone-a"}}}
		Expect(k8sClient.Create(ctx, node)).To(Succeed())
		pod := readyPod(ns, "web-1", web, "10.0.0.1", func(p *corev1.Pod) { p.Spec.NodeName = node.Name })

		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		ep, _ := storedEndpoint(key("web", ns, "web-1"))
		Expect(ep.Service).To(Equal("web"))
		Expect(ep.Namespace).To(Equal(ns))
		Expect(ep.Pod).To(Equal("web-1"))
		Expect(ep.UID).To(Equal(string(pod.UID)))
		Expect(ep.Address).To(Equal("10.0.0.1"))
		Expect(ep.Ports).To(Equal(map[string]int32{"http": 8080, "metrics": 9090}))
		Expect(ep.Node).To(Equal(node.Name))
		Expect(ep.Zone).To(Equal("zone-a"))
		Expect(ep.Cluster).To(Equal("test-cluster"))
		Expect(ep.Owner).To(Equal(string(getRegistry(reg).UID)))
		Expect(ep.RegisteredAt).NotTo(BeZero())

		Eventually(func(g Gomega) {
			st := getRegistry(reg).Status
			g.Expect(st.ObservedGeneration).To(Equal(getRegistry(reg).Generation))
			g.Expect(st.ServiceName).To(Equal("web"))
			g.Expect(st.Registered).To(Equal(int32(1)))
			g.Expect(st.Desired).To(Equal(int32(1)))
			g.Expect(st.Endpoints).To(HaveLen(1))
			g.Expect(st.Endpoints[0].State).To(Equal(v1beta1.EndpointRegistered))
			g.Expect(st.Endpoints[0].IP).To(Equal("10.0.0.1"))
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(condition(reg, v1beta1.ConditionReady)).Should(haveCondition(metav1.ConditionTrue, "AllRegistered"))
		Eventually(condition(reg, v1beta1.ConditionStoreSynced)).Should(haveCondition(metav1.ConditionTrue, "Synced"))
		Expect(getRegistry(reg).Finalizers).To(ContainElement(controller.Finalizer))
	})

	It("reports zero counts explicitly, so printer columns show them", func() {
		Eventually(func(g Gomega) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("ServiceRegistry"))
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(reg), u)).To(Succeed())
			for _, field := range []string{"registered", "desired"} {
				n, found, err := unstructured.NestedInt64(u.Object, "status", field)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(found).To(BeTrue(), "status.%s missing", field)
				g.Expect(n).To(BeZero())
			}
		}).WithTimeout(timeout).Should(Succeed())
	})

	It("does not register pods before they are running, addressed and ready", func() {
		pending := newPod(ns, "pending", web)
		noIP := newPod(ns, "no-ip", web)
		setPodStatus(noIP, corev1.PodRunning, "", true)
		notReady := newPod(ns, "not-ready", web)
		setPodStatus(notReady, corev1.PodRunning, "10.0.0.3", false)
		readyPod(ns, "ready", web, "10.0.0.4")

		eventuallyStored("web", ns).Should(ConsistOf("ready"))
		Consistently(func() []string { return storedPods("web", ns) }).WithTimeout(time.Second).Should(ConsistOf("ready"))
		Eventually(func(g Gomega) {
			states := map[string]v1beta1.EndpointState{}
			for _, e := range getRegistry(reg).Status.Endpoints {
				states[e.Pod] = e.State
			}
			g.Expect(states).To(Equal(map[string]v1beta1.EndpointState{
				pending.Name: v1beta1.EndpointPending, noIP.Name: v1beta1.EndpointPending,
				notReady.Name: v1beta1.EndpointUnready, "ready": v1beta1.EndpointRegistered,
			}))
		}).WithTimeout(timeout).Should(Succeed())
	})

	DescribeTable("deregisters a pod on the event that makes it ineligible",
		func(makeIneligible func(*corev1.Pod), wantState v1beta1.EndpointState) {
			pod := readyPod(ns, "web-1", web, "10.0.0.1")
			readyPod(ns, "web-2", web, "10.0.0.2")
			eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"))

			lag := watchDeletion(key("web", ns, "web-1"))
			makeIneligible(pod)
			eventuallyStored("web", ns).Should(ConsistOf("web-2"))
			AddReportEntry("deregistration lag", (<-lag).String())

			if wantState != "" {
				Eventually(func() v1beta1.EndpointState {
					for _, e := range getRegistry(reg).Status.Endpoints {
						if e.Pod == "web-1" {
							return e.State
						}
					}
					return ""
				}).WithTimeout(timeout).Should(Equal(wantState))
			}
			Eventually(func() int32 { return getRegistry(reg).Status.Registered }).WithTimeout(timeout).Should(Equal(int32(1)))
		},
		Entry("containers not ready", func(p *corev1.Pod) {
			setPodStatus(p, corev1.PodRunning, "10.0.0.1", false)
		}, v1beta1.EndpointUnready),
		Entry("phase Failed", func(p *corev1.Pod) {
			setPodStatus(p, corev1.PodFailed, "10.0.0.1", false)
		}, v1beta1.EndpointUnready),
		Entry("phase Succeeded, even with ready conditions left over", func(p *corev1.Pod) {
			setPodStatus(p, corev1.PodSucceeded, "10.0.0.1", true)
		}, v1beta1.EndpointUnready),
		Entry("deletionTimestamp set while containers are still ready", func(p *corev1.Pod) {
			patch := client.MergeFrom(p.DeepCopy())
			p.Finalizers = append(p.Finalizers, "test.registrar.dev/hold")
			Expect(k8sClient.Patch(context.Background(), p, patch)).To(Succeed())
			Expect(k8sClient.Delete(context.Background(), p)).To(Succeed())
			DeferCleanup(func() {
				cur := &corev1.Pod{}
				Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(p), cur)).To(Succeed())
				patch := client.MergeFrom(cur.DeepCopy())
				cur.Finalizers = nil
				Expect(k8sClient.Patch(context.Background(), cur, patch)).To(Succeed())
			})
		}, v1beta1.EndpointDraining),
		Entry("pod deleted", func(p *corev1.Pod) { deletePodNow(p) }, v1beta1.EndpointState("")),
	)

	It("follows a selector change", func() {
		readyPod(ns, "web-1", web, "10.0.0.1")
		readyPod(ns, "api-1", map[string]string{"app": "api"}, "10.0.0.9")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))

		updateRegistry(reg, func(r *v1beta1.ServiceRegistry) { r.Spec.Selector.MatchLabels = map[string]string{"app": "api"} })
		eventuallyStored("web", ns).Should(ConsistOf("api-1"))
		Eventually(func() int64 { return getRegistry(reg).Status.ObservedGeneration }).
			WithTimeout(timeout).Should(Equal(getRegistry(reg).Generation))
	})

	It("follows a pod whose labels stop matching", func() {
		pod := readyPod(ns, "web-1", web, "10.0.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Labels = map[string]string{"app": "other"}
		Expect(k8sClient.Patch(ctx, pod, patch)).To(Succeed())
		eventuallyStored("web", ns).Should(BeEmpty())
	})

	It("moves endpoints when spec.serviceName changes", func() {
		readyPod(ns, "web-1", web, "10.0.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		updateRegistry(reg, func(r *v1beta1.ServiceRegistry) { r.Spec.ServiceName = "frontend" })
		eventuallyStored("frontend", ns).Should(ConsistOf("web-1"))
		eventuallyStored("web", ns).Should(BeEmpty())
	})

	It("ignores pods of other namespaces and pods that do not match", func() {
		other := newNamespace()
		readyPod(other, "web-elsewhere", web, "10.0.1.1")
		readyPod(ns, "api-1", map[string]string{"app": "api"}, "10.0.0.9")
		readyPod(ns, "web-1", web, "10.0.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Consistently(func() []string { return storedPods("web", other) }).WithTimeout(time.Second).Should(BeEmpty())
		Expect(storedPods("web", ns)).To(ConsistOf("web-1"))
	})

	It("updates the endpoint when a pod of the same name is recreated with a new UID", func() {
		first := readyPod(ns, "web-1", web, "10.0.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		deletePodNow(first)
		eventuallyStored("web", ns).Should(BeEmpty())

		second := readyPod(ns, "web-1", web, "10.0.0.7")
		Expect(second.UID).NotTo(Equal(first.UID))
		Eventually(func() *store.Endpoint { ep, _ := storedEndpoint(key("web", ns, "web-1")); return ep }).
			WithTimeout(timeout).Should(And(Not(BeNil()),
			HaveField("UID", string(second.UID)), HaveField("Address", "10.0.0.7")))
	})

	It("rewrites only the endpoint whose content changed", func() {
		readyPod(ns, "web-1", web, "10.0.0.1")
		moving := readyPod(ns, "web-2", web, "10.0.0.2")
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"))
		_, rev1 := storedEndpoint(key("web", ns, "web-1"))

		setPodStatus(moving, corev1.PodRunning, "10.0.0.22", true)
		Eventually(func() string { ep, _ := storedEndpoint(key("web", ns, "web-2")); return ep.Address }).
			WithTimeout(timeout).Should(Equal("10.0.0.22"))
		_, rev1After := storedEndpoint(key("web", ns, "web-1"))
		Expect(rev1After).To(Equal(rev1), "an unchanged endpoint was rewritten")
	})

	It("removes its endpoints and then its finalizer when deleted, leaving foreign keys alone", func() {
		readyPod(ns, "web-1", web, "10.0.0.1")
		readyPod(ns, "web-2", web, "10.0.0.2")
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"))
		foreign := store.Endpoint{Service: "web", Namespace: ns, Pod: "manual", Address: "10.9.9.9", Owner: "another-installation"}
		putRaw(key("web", ns, "manual"), foreign)

		deleteRegistry(reg)
		Expect(storedPods("web", ns)).To(ConsistOf("manual"))
		ep, _ := storedEndpoint(key("web", ns, "manual"))
		Expect(*ep).To(Equal(foreign))
	})

	It("never overwrites or deletes a key owned by someone else, and reports the conflict", func() {
		foreign := store.Endpoint{Service: "web", Namespace: ns, Pod: "web-1", Address: "10.9.9.9", Owner: "another-installation"}
		putRaw(key("web", ns, "web-1"), foreign)
		putRaw(key("web", ns, "unrelated"), store.Endpoint{Pod: "unrelated", Owner: "another-installation"})
		readyPod(ns, "web-1", web, "10.0.0.1")
		readyPod(ns, "web-2", web, "10.0.0.2")

		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2", "unrelated"))
		Eventually(condition(reg, v1beta1.ConditionReady)).WithTimeout(timeout).Should(haveCondition(metav1.ConditionFalse, "KeyConflict"))
		Consistently(func() store.Endpoint { ep, _ := storedEndpoint(key("web", ns, "web-1")); return *ep }).
			WithTimeout(time.Second).Should(Equal(foreign))
	})

	It("rejects invalid specs with a message naming the field", func() {
		bad := &v1beta1.ServiceRegistry{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
			Spec:       v1beta1.ServiceRegistrySpec{Selector: metav1.LabelSelector{}},
		}
		err := k8sClient.Create(ctx, bad)
		Expect(err).To(MatchError(ContainSubstring("spec.selector")))

		two := int32(2)
		bad.Spec = v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: web},
			Ports:    []v1beta1.ServicePort{{Name: "http", Port: two, TargetPort: "http"}},
		}
		Expect(k8sClient.Create(ctx, bad)).To(MatchError(ContainSubstring("spec.ports[0]")))

		bad.Spec.Ports = []v1beta1.ServicePort{{Name: "http", Port: two}, {Name: "http", Port: two}}
		Expect(k8sClient.Create(ctx, bad)).To(MatchError(ContainSubstring("ports[].name must be unique")))

		bad.Spec.Ports = nil
		bad.Spec.ServiceName = "Not_A_Label"
		Expect(k8sClient.Create(ctx, bad)).To(MatchError(ContainSubstring("spec.serviceName")))

		bad.Name, bad.Spec.ServiceName = "dotted.name", ""
		Expect(k8sClient.Create(ctx, bad)).To(MatchError(ContainSubstring("spec.serviceName is required")))
	})
})

// watchDeletion watches key and reports the time from its return (just before the test's
// API write) until the store deleted the key.
func watchDeletion(k string) <-chan time.Duration {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	wch := storeClient.Watch(ctx, k, clientv3.WithCreatedNotify())
	Expect((<-wch).Created).To(BeTrue(), "store watch not established")
	start := time.Now()
	out := make(chan time.Duration, 1)
	go func() {
		defer cancel()
		for resp := range wch {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					out <- time.Since(start)
					return
				}
			}
		}
		out <- -1
	}()
	return out
}
