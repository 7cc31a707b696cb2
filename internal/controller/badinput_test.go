package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
)

// invalidSpec is one ServiceRegistry the API server must refuse, and the field its message
// must name.
type invalidSpec struct {
	name  string
	spec  string // the JSON of spec
	field string // substring the error must contain: the field path
	also  string // another substring (the rule's message), optional
}

const okSelector = `"selector":{"matchLabels":{"app":"x"}}`
const okPorts = `"ports":[{"name":"http","port":8080}]`

// invalidSpecs are hostile or malformed specs: each must be rejected by the CRD's OpenAPI
// schema or CEL rules (config/crd/bases) with a message naming the field.
var invalidSpecs = []invalidSpec{
	{"empty selector", `{"selector":{}}`, "spec.selector", "selector must not be empty"},
	{"empty matchLabels", `{"selector":{"matchLabels":{}}}`, "spec.selector", "selector must not be empty"},
	{"missing selector", `{` + okPorts + `}`, "spec.selector", "Required value"},
	{"selector operator unknown", `{"selector":{"matchExpressions":[{"key":"app","operator":"Resembles","values":["x"]}]}}`, "spec.selector", "operator must be In, NotIn, Exists or DoesNotExist"},
	{"selector In without values", `{"selector":{"matchExpressions":[{"key":"app","operator":"In"}]}}`, "spec.selector", "In and NotIn need at least one value"},
	{"selector Exists with values", `{"selector":{"matchExpressions":[{"key":"app","operator":"Exists","values":["x"]}]}}`, "spec.selector", "Exists and DoesNotExist take none"},
	{"serviceName not a label", `{"serviceName":"Not_A_Label",` + okSelector + `}`, "spec.serviceName", ""},
	{"serviceName with a slash", `{"serviceName":"a/b",` + okSelector + `}`, "spec.serviceName", ""},
	{"serviceName dot-dot", `{"serviceName":"..",` + okSelector + `}`, "spec.serviceName", ""},
	{"serviceName of 64 characters", `{"serviceName":"` + strings.Repeat("a", 64) + `",` + okSelector + `}`, "spec.serviceName", ""},
	{"duplicate port names", `{` + okSelector + `,"ports":[{"name":"http","port":1},{"name":"http","port":2}]}`, "spec.ports", "ports[].name must be unique"},
	{"port and targetPort", `{` + okSelector + `,"ports":[{"name":"http","port":1,"targetPort":"http"}]}`, "spec.ports[0]", "exactly one of port or targetPort"},
	{"neither port nor targetPort", `{` + okSelector + `,"ports":[{"name":"http"}]}`, "spec.ports[0]", "exactly one of port or targetPort"},
	{"port 0", `{` + okSelector + `,"ports":[{"name":"http","port":0}]}`, "spec.ports[0].port", ""},
	{"port 70000", `{` + okSelector + `,"ports":[{"name":"http","port":70000}]}`, "spec.ports[0].port", ""},
	{"port as a string", `{` + okSelector + `,"ports":[{"name":"http","port":"eighty"}]}`, "spec.ports[0].port", ""},
	{"upper-case port name", `{` + okSelector + `,"ports":[{"name":"HTTP","port":80}]}`, "spec.ports[0].name", ""},
	{"targetPort of 16 characters", `{` + okSelector + `,"ports":[{"name":"http","targetPort":"abcdefghijklmnop"}]}`, "spec.ports[0].targetPort", ""},
	{"33 ports", `{` + okSelector + `,"ports":[` + manyPorts(33) + `]}`, "spec.ports", "Too many"},
	{"negative drain", `{` + okSelector + `,"drain":{"seconds":-1}}`, "spec.drain.seconds", ""},
	{"drain over an hour", `{` + okSelector + `,"drain":{"seconds":3601}}`, "spec.drain.seconds", ""},
	{"drain as a string", `{` + okSelector + `,"drain":{"seconds":"ten"}}`, "spec.drain.seconds", ""},
	{"negative caller cache", `{` + okSelector + `,"drain":{"callerCacheSeconds":-5}}`, "spec.drain.callerCacheSeconds", ""},
	{"zero warm-up requests", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"requests":0}}`, "spec.warmup.requests", ""},
	{"a million warm-up requests", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"requests":1000000}}`, "spec.warmup.requests", ""},
	{"negative warm-up requests", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"requests":-10}}`, "spec.warmup.requests", ""},
	{"warm-up concurrency 65", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"concurrency":65}}`, "spec.warmup.concurrency", ""},
	{"warm-up without paths", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":[]}}`, "spec.warmup.paths", ""},
	{"warm-up path without slash", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["healthz"]}}`, "spec.warmup.paths[0]", ""},
	{"warm-up path with CRLF", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/x\r\nHost: evil"]}}`, "spec.warmup.paths[0]", ""},
	{"warm-up path with a space", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/a b"]}}`, "spec.warmup.paths[0]", ""},
	{"17 warm-up paths", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":[` + strings.TrimSuffix(strings.Repeat(`"/p",`, 17), ",") + `]}}`, "spec.warmup.paths", "Too many"},
	{"warm-up path of 1025 bytes", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/` + strings.Repeat("a", 1024) + `"]}}`, "spec.warmup.paths[0]", ""},
	{"warm-up timeout not an integer", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeoutMillis":"30s"}}`, "spec.warmup.timeoutMillis", ""},
	{"negative warm-up timeout", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeoutMillis":-5000}}`, "spec.warmup.timeoutMillis", ""},
	{"warm-up timeout of two days", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeoutMillis":172800000}}`, "spec.warmup.timeoutMillis", "less than or equal to 3600000"},
	{"zero request timeout", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"requestTimeoutMillis":0}}`, "spec.warmup.requestTimeoutMillis", "greater than or equal to 10"},
	{"minDuration longer than timeout", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeoutMillis":10000,"minDurationMillis":20000}}`, "spec.warmup.minDurationMillis", "must not be longer than timeoutMillis"},
	{"warm-up timeout of 10ms", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"timeoutMillis":10}}`, "spec.warmup.timeoutMillis", "greater than or equal to 100"},
	{"warm-up without ports", `{` + okSelector + `,"warmup":{"paths":["/"]}}`, "spec.warmup", "needs at least one entry in ports"},
	{"warm-up port naming no port", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"port":"grpc"}}`, "spec.warmup.port", "must name an entry of ports"},
	{"slow start without a window", `{` + okSelector + `,"slowStart":{"minWeightPercent":10}}`, "spec.slowStart.windowSeconds", "Required value"},
	{"slow-start window of 0 seconds", `{` + okSelector + `,"slowStart":{"windowSeconds":0}}`, "spec.slowStart.windowSeconds", "greater than or equal to 1"},
	{"slow-start window of two hours", `{` + okSelector + `,"slowStart":{"windowSeconds":7200}}`, "spec.slowStart.windowSeconds", "less than or equal to 3600"},
	{"slow-start window not an integer", `{` + okSelector + `,"slowStart":{"windowSeconds":"60s"}}`, "spec.slowStart.windowSeconds", ""},
	{"slow-start minimum weight 0", `{` + okSelector + `,"slowStart":{"windowSeconds":30,"minWeightPercent":0}}`, "spec.slowStart.minWeightPercent", ""},
	{"slow-start minimum weight 100", `{` + okSelector + `,"slowStart":{"windowSeconds":30,"minWeightPercent":100}}`, "spec.slowStart.minWeightPercent", ""},
	{"sharing with no namespace", `{` + okSelector + `,"sharing":{"namespaces":[]}}`, "spec.sharing.namespaces", ""},
	{"sharing with a namespace that is not a name", `{` + okSelector + `,"sharing":{"namespaces":["Shop/x"]}}`, "spec.sharing.namespaces[0]", ""},
	{"sharing with everyone and someone", `{` + okSelector + `,"sharing":{"namespaces":["*","shop"]}}`, "spec.sharing.namespaces", "must be the only entry"},
	{"sharing with 65 namespaces", `{` + okSelector + `,"sharing":{"namespaces":[` + manyNamespaces(65) + `]}}`, "spec.sharing.namespaces", "Too many"},
	{"unknown onFailure", `{` + okSelector + `,` + okPorts + `,"warmup":{"paths":["/"],"onFailure":"Retry"}}`, "spec.warmup.onFailure", ""},
}

func manyNamespaces(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf(`"ns-%d"`, i)
	}
	return strings.Join(names, ",")
}

func manyPorts(n int) string {
	ports := make([]string, n)
	for i := range ports {
		ports[i] = fmt.Sprintf(`{"name":"p%d","port":%d}`, i, 1000+i)
	}
	return strings.Join(ports, ",")
}

var _ = Describe("Hostile input", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace()
	})

	// healthy creates a registry with one registered pod, to show that it keeps its
	// registration whatever else the test throws at the operator.
	healthy := func() func() {
		GinkgoHelper()
		newRegistry(ns, "healthy", "healthy")
		readyPod(ns, "healthy-1", map[string]string{"app": "healthy"}, "10.1.0.1")
		eventuallyStored("healthy", ns).Should(ConsistOf("healthy-1"))
		return func() {
			GinkgoHelper()
			Consistently(func() []string { return storedPods("healthy", ns) }).WithTimeout(timeout/5).WithPolling(poll).
				Should(ConsistOf("healthy-1"), "the healthy registry lost its registration")
			Expect(getRegistry(&v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "healthy"}}).Status.Registered).To(Equal(int32(1)))
		}
	}

	It("rejects hostile ServiceRegistry specs at the API server, naming the field", func() {
		stillServing := healthy()
		Expect(len(invalidSpecs)).To(BeNumerically(">=", 20))
		for i, tc := range invalidSpecs {
			var spec map[string]any
			Expect(json.Unmarshal([]byte(tc.spec), &spec)).To(Succeed(), tc.name)
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1beta1.GroupVersion.String(), "kind": "ServiceRegistry",
				"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("bad-%d", i)},
				"spec":     spec,
			}}
			err := k8sClient.Create(ctx, u)
			Expect(err).To(HaveOccurred(), "%s: the API server accepted %s", tc.name, tc.spec)
			Expect(err.Error()).To(ContainSubstring(tc.field), tc.name)
			Expect(err.Error()).To(ContainSubstring(tc.also), tc.name)
			GinkgoWriter.Printf("%-36s -> %s\n", tc.name, err)
		}
		var list v1beta1.ServiceRegistryList
		Expect(k8sClient.List(ctx, &list)).To(Succeed())
		for _, r := range list.Items {
			Expect(r.Name).NotTo(HavePrefix("bad-"))
		}
		stillServing()
	})

	It("holds back a pod without an IP, and publishes IPv6 pods, pods with many ports and pods with huge labels", func() {
		stillServing := healthy()
		newRegistry(ns, "odd", "odd")
		odd := map[string]string{"app": "odd"}

		noIP := newPod(ns, "no-ip", odd)
		setPodStatus(noIP, corev1.PodRunning, "", true)
		readyPod(ns, "ipv6", odd, "fd00::10")
		huge := map[string]string{"app": "odd"}
		for i := range 60 {
			huge[fmt.Sprintf("example.com/%s-%02d", strings.Repeat("k", 48), i)] = strings.Repeat("v", 63)
		}
		readyPod(ns, "huge-labels", huge, "10.2.0.3", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"example.com/blob": strings.Repeat("x", 200_000)}
		})

		wide := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wide"},
			Spec: v1beta1.ServiceRegistrySpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "wide"}}}}
		for i := range 32 {
			wide.Spec.Ports = append(wide.Spec.Ports, v1beta1.ServicePort{Name: fmt.Sprintf("p%d", i), TargetPort: fmt.Sprintf("p%d", i)})
		}
		Expect(k8sClient.Create(ctx, wide)).To(Succeed())
		DeferCleanup(deleteRegistry, wide)
		readyPod(ns, "many-ports", map[string]string{"app": "wide"}, "10.2.0.4", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = nil
			for i := range 200 {
				p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
					corev1.ContainerPort{Name: fmt.Sprintf("p%d", i), ContainerPort: int32(10000 + i)})
			}
		})

		eventuallyStored("odd", ns).Should(ConsistOf("ipv6", "huge-labels"))
		v6, _ := storedEndpoint(key("odd", ns, "ipv6"))
		Expect(v6.Address).To(Equal("fd00::10"))
		eventuallyStored("wide", ns).Should(ConsistOf("many-ports"))
		ep, _ := storedEndpoint(key("wide", ns, "many-ports"))
		Expect(ep.Ports).To(HaveLen(32))
		Expect(ep.Ports).To(HaveKeyWithValue("p31", int32(10031)))
		Eventually(func() []v1beta1.EndpointStatus {
			return getRegistry(&v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "odd"}}).Status.Endpoints
		}).
			WithTimeout(timeout).WithPolling(poll).Should(ContainElement(And(HaveField("Pod", "no-ip"),
			HaveField("State", v1beta1.EndpointPending), HaveField("Reason", "NoPodIP"))))
		stillServing()
	})

	It("never overwrites or deletes store values that are not JSON or belong to another owner, and says so", func() {
		stillServing := healthy()
		reg := newRegistry(ns, "guarded", "guarded")
		guarded := map[string]string{"app": "guarded"}
		raw := map[string]string{
			key("guarded", ns, "raw-1"):     "not json",
			key("guarded", ns, "empty-1"):   "",
			key("guarded", ns, "foreign-1"): `{"pod":"foreign-1","address":"10.9.9.9","owner":"another-installation"}`,
			key("guarded", ns, "stray"):     "\x00\xff garbage",
			key("guarded", ns, "a/b"):       `{"owner":"` + string(reg.UID) + `"}`,
		}
		for k, v := range raw {
			putString(k, v)
		}
		for _, name := range []string{"raw-1", "empty-1", "foreign-1", "ok-1"} {
			readyPod(ns, name, guarded, "10.3.0.1")
		}
		Eventually(func() *store.Endpoint { ep, _ := storedEndpoint(key("guarded", ns, "ok-1")); return ep }).
			WithTimeout(timeout).WithPolling(poll).ShouldNot(BeNil())
		Eventually(condition(reg, v1beta1.ConditionReady)).WithTimeout(timeout).WithPolling(poll).
			Should(haveCondition(metav1.ConditionFalse, "KeyConflict"))
		// The pods are created one by one: a first KeyConflict may name only some of them.
		Eventually(func() string {
			c := meta.FindStatusCondition(getRegistry(reg).Status.Conditions, v1beta1.ConditionReady)
			if c == nil {
				return ""
			}
			return c.Message
		}).WithTimeout(timeout).WithPolling(poll).Should(And(ContainSubstring("raw-1"), ContainSubstring("empty-1"), ContainSubstring("foreign-1")))
		Expect(getRegistry(reg).Status.Endpoints).To(ContainElement(And(HaveField("Pod", "raw-1"), HaveField("Reason", "KeyConflict"))))
		Consistently(func(g Gomega) {
			for k, v := range raw {
				g.Expect(rawValue(k)).To(Equal(v), k)
			}
		}).WithTimeout(timeout / 5).WithPolling(100 * time.Millisecond).Should(Succeed())

		By("leaving them in place when the registry is deleted")
		deleteRegistry(reg)
		Expect(storedPods("guarded", ns)).NotTo(ContainElement("ok-1"))
		for k, v := range raw {
			Expect(rawValue(k)).To(Equal(v), k)
		}
		stillServing()
	})

	It("gives a pod that two registries of one service select to the older one, which takes it over", func() {
		stillServing := healthy()
		web := map[string]string{"app": "web"}
		stable := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stable"},
			Spec: v1beta1.ServiceRegistrySpec{ServiceName: "shop", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "nothing-yet"}}}}
		Expect(k8sClient.Create(ctx, stable)).To(Succeed())
		DeferCleanup(deleteRegistry, stable)
		// Created second and named after "stable": younger by creationTimestamp, or by name
		// when both were created within the same second.
		all := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wide-all"},
			Spec: v1beta1.ServiceRegistrySpec{ServiceName: "shop", Selector: metav1.LabelSelector{MatchLabels: web}}}
		Expect(k8sClient.Create(ctx, all)).To(Succeed())
		DeferCleanup(deleteRegistry, all)
		stable, all = getRegistry(stable), getRegistry(all)
		Expect(stable.CreationTimestamp.Time).NotTo(BeTemporally(">", all.CreationTimestamp.Time))
		readyPod(ns, "stable-1", map[string]string{"app": "web", "track": "stable"}, "10.4.0.1")
		readyPod(ns, "canary-1", map[string]string{"app": "web", "track": "canary"}, "10.4.0.2")
		ownerOf := func(pod string) func() string {
			return func() string {
				ep, _ := storedEndpoint(key("shop", ns, pod))
				if ep == nil {
					return ""
				}
				return ep.Owner
			}
		}
		By("the younger registry publishing both while the selectors are disjoint")
		Eventually(ownerOf("stable-1")).WithTimeout(timeout).WithPolling(poll).Should(Equal(string(all.UID)))
		Eventually(ownerOf("canary-1")).WithTimeout(timeout).WithPolling(poll).Should(Equal(string(all.UID)))
		Eventually(condition(all, v1beta1.ConditionReady)).WithTimeout(timeout).WithPolling(poll).Should(haveCondition(metav1.ConditionTrue, "AllRegistered"))

		By("the older registry's selector starting to overlap: it takes stable-1 over, the younger one yields it")
		updateRegistry(stable, func(r *v1beta1.ServiceRegistry) {
			r.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "track": "stable"}}
		})
		Eventually(ownerOf("stable-1")).WithTimeout(timeout).WithPolling(poll).Should(Equal(string(stable.UID)))
		Consistently(ownerOf("canary-1")).WithTimeout(time.Second).WithPolling(poll).Should(Equal(string(all.UID)))
		Eventually(condition(all, v1beta1.ConditionReady)).WithTimeout(timeout).WithPolling(poll).Should(haveCondition(metav1.ConditionFalse, "SelectorOverlap"))
		msg := meta.FindStatusCondition(getRegistry(all).Status.Conditions, v1beta1.ConditionReady).Message
		Expect(msg).To(And(ContainSubstring("stable-1"), ContainSubstring("older ServiceRegistry stable"), ContainSubstring(`service "shop"`)))
		Expect(getRegistry(all).Status.Endpoints).To(ContainElement(And(HaveField("Pod", "stable-1"),
			HaveField("State", v1beta1.EndpointPending), HaveField("Reason", "SelectorOverlap"))))
		Eventually(condition(stable, v1beta1.ConditionReady)).WithTimeout(timeout).WithPolling(poll).Should(haveCondition(metav1.ConditionTrue, "AllRegistered"))

		By("the older registry going away: the younger one takes stable-1 back")
		deleteRegistry(stable)
		Eventually(ownerOf("stable-1")).WithTimeout(timeout).WithPolling(poll).Should(Equal(string(all.UID)))
		Eventually(condition(all, v1beta1.ConditionReady)).WithTimeout(timeout).WithPolling(poll).Should(haveCondition(metav1.ConditionTrue, "AllRegistered"))
		Expect(storedPods("shop", ns)).To(ConsistOf("stable-1", "canary-1"))
		stillServing()
	})
})

// putString writes a raw value to the store with the suite's separate client.
func putString(k, v string) {
	GinkgoHelper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := storeClient.Put(c, k, v)
	Expect(err).NotTo(HaveOccurred())
}

// rawValue reads a raw value from the store; "<absent>" when the key is not there.
func rawValue(k string) string {
	GinkgoHelper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := storeClient.Get(c, k)
	Expect(err).NotTo(HaveOccurred())
	if len(resp.Kvs) == 0 {
		return "<absent>"
	}
	return string(resp.Kvs[0].Value)
}
