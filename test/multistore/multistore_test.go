package multistore_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

const (
	timeout = 20 * time.Second
	poll    = 20 * time.Millisecond
)

var _ = Describe("Publishing to etcd and DNS at once", Serial, func() {
	var ns string
	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "multi-"}}
		Expect(k8sClient.Create(context.Background(), n)).To(Succeed())
		ns = n.Name
	})

	It("registers ready pods in both stores, deregisters an unready one from both, and reports each store", func() {
		reg := newRegistry(ns, "web", []string{"etcd", "coredns"})
		pods := []*corev1.Pod{readyPod(ns, "web-0", "10.1.0.1"), readyPod(ns, "web-1", "10.1.0.2")}

		Eventually(func() []string { return etcdPods("web", ns) }).WithTimeout(timeout).WithPolling(poll).
			Should(Equal([]string{"web-0", "web-1"}))
		Eventually(func() []string { return dnsA("web", ns) }).WithTimeout(timeout).WithPolling(poll).
			Should(Equal([]string{"10.1.0.1", "10.1.0.2"}))
		srv, ttl := dnsSRV("web", ns, "http")
		Expect(srv).To(ConsistOf(
			fmt.Sprintf("8080 web-0._http._tcp.web.%s.%s.", ns, zone), fmt.Sprintf("8080 web-1._http._tcp.web.%s.%s.", ns, zone)))
		Expect(ttl).To(Equal(uint32(dnsTTL.Seconds())), "the TTL the answers carry")
		Eventually(func() []v1beta1.StoreStatus { return getRegistry(reg).Status.Stores }).WithTimeout(timeout).Should(Equal([]v1beta1.StoreStatus{
			{Name: "etcd", Registered: 2, Synced: true}, {Name: "coredns", Registered: 2, Synced: true},
		}))
		Eventually(condition(reg, v1beta1.ConditionStoreSynced)).WithTimeout(timeout).Should(haveStatus(metav1.ConditionTrue))

		// web-0 turns unready: measure until DNS stops answering with it (server side).
		start := time.Now()
		setPodStatus(pods[0], "10.1.0.1", false)
		Eventually(func() []string { return dnsA("web", ns) }).WithTimeout(timeout).WithPolling(time.Millisecond).
			Should(Equal([]string{"10.1.0.2"}))
		gone := time.Since(start)
		AddReportEntry("unready -> gone from DNS", gone.String())
		GinkgoWriter.Printf("unready -> gone from DNS (server side, no client cache): %s\n", gone)
		Eventually(func() []string { return etcdPods("web", ns) }).WithTimeout(timeout).Should(Equal([]string{"web-1"}))

		// Deleting the registry drains both stores.
		Expect(k8sClient.Delete(context.Background(), reg)).To(Succeed())
		Eventually(func() []string { return etcdPods("web", ns) }).WithTimeout(timeout).Should(BeEmpty())
		Eventually(func() int { _, rcode := dnsQuery("web."+ns+"."+zone, dns.TypeA); return rcode }).
			WithTimeout(timeout).Should(Equal(dns.RcodeNameError))
	})

	It("keeps etcd up to date while the DNS store is down, names the failing store, and catches DNS up", func() {
		reg := newRegistry(ns, "api", []string{"etcd", "coredns"})
		readyPod(ns, "api-0", "10.2.0.1")
		Eventually(func() []string { return dnsA("api", ns) }).WithTimeout(timeout).Should(Equal([]string{"10.2.0.1"}))

		dnsEtcd.Stop()
		DeferCleanup(func() { Expect(dnsEtcd.Resume()).To(Succeed()) })
		readyPod(ns, "api-1", "10.2.0.2")
		Eventually(func() []string { return etcdPods("api", ns) }).WithTimeout(timeout).Should(Equal([]string{"api-0", "api-1"}))
		Eventually(condition(reg, v1beta1.ConditionStoreSynced)).WithTimeout(timeout).Should(And(
			haveStatus(metav1.ConditionFalse),
			WithTransform(func(c *metav1.Condition) string { return c.Message }, ContainSubstring("store coredns"))))
		Eventually(func() []v1beta1.StoreStatus { return getRegistry(reg).Status.Stores }).WithTimeout(timeout).Should(
			ContainElement(And(HaveField("Name", "coredns"), HaveField("Synced", false), HaveField("Message", Not(BeEmpty())))))

		Expect(dnsEtcd.Resume()).To(Succeed())
		Eventually(func() []string { return dnsA("api", ns) }).WithTimeout(timeout).WithPolling(100 * time.Millisecond).
			Should(Equal([]string{"10.2.0.1", "10.2.0.2"}))
		Eventually(condition(reg, v1beta1.ConditionStoreSynced)).WithTimeout(timeout).Should(haveStatus(metav1.ConditionTrue))
		deleteRegistry(reg)
	})

	It("carries spec.dns.ttlSeconds in the answers, and rewrites the records when it changes", func() {
		reg := newRegistry(ns, "ttl", []string{"etcd", "coredns"}, func(r *v1beta1.ServiceRegistry) {
			r.Spec.DNS = &v1beta1.DNSSpec{TTLSeconds: 7}
		})
		readyPod(ns, "ttl-0", "10.4.0.1")
		Eventually(func() []uint32 { return dnsTTLs("ttl", ns) }).WithTimeout(timeout).Should(Equal([]uint32{7}))
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := getRegistry(reg)
			cur.Spec.DNS.TTLSeconds = 3
			return k8sClient.Update(context.Background(), cur)
		})).To(Succeed())
		Eventually(func() []uint32 { return dnsTTLs("ttl", ns) }).WithTimeout(timeout).Should(Equal([]uint32{3}))
		Expect(etcdPods("ttl", ns)).To(Equal([]string{"ttl-0"}))
		deleteRegistry(reg)
	})

	It("reports a store the installation does not configure", func() {
		reg := newRegistry(ns, "jvm", []string{"zookeeper"})
		readyPod(ns, "jvm-0", "10.3.0.1")
		Eventually(condition(reg, v1beta1.ConditionStoreSynced)).WithTimeout(timeout).Should(And(
			haveStatus(metav1.ConditionFalse),
			WithTransform(func(c *metav1.Condition) string { return c.Message }, ContainSubstring(`["zookeeper"] named but this installation configures only etcd, coredns`))))
		Consistently(func() []string { return etcdPods("jvm", ns) }).WithTimeout(time.Second).Should(BeEmpty())
		deleteRegistry(reg)
	})

	It("rejects a change of spec.stores, naming the field", func() {
		reg := newRegistry(ns, "fixed", []string{"etcd"})
		var err error
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error { // the operator writes too
			cur := getRegistry(reg)
			cur.Spec.Stores = []string{"etcd", "coredns"}
			err = k8sClient.Update(context.Background(), cur)
			return err
		})).NotTo(Succeed())
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "update error: %v", err)
		Expect(err.Error()).To(ContainSubstring("stores cannot change after creation"))
		bad := &v1beta1.ServiceRegistry{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
			Spec: v1beta1.ServiceRegistrySpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "bad"}},
				Stores:   []string{"consul"},
			},
		}
		err = k8sClient.Create(context.Background(), bad)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "create error: %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.stores[0]"))
		deleteRegistry(reg)
	})
})

func newRegistry(ns, name string, stores []string, mutate ...func(*v1beta1.ServiceRegistry)) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Ports:    []v1beta1.ServicePort{{Name: "http", Port: 8080}},
			Stores:   stores,
		},
	}
	for _, m := range mutate {
		m(reg)
	}
	Expect(k8sClient.Create(context.Background(), reg)).To(Succeed())
	DeferCleanup(deleteRegistry, reg)
	return reg
}

func deleteRegistry(reg *v1beta1.ServiceRegistry) {
	GinkgoHelper()
	err := k8sClient.Delete(context.Background(), reg)
	if apierrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(reg), &v1beta1.ServiceRegistry{}))
	}).WithTimeout(timeout).Should(BeTrue(), "ServiceRegistry %s was not finalized", reg.Name)
}

func getRegistry(reg *v1beta1.ServiceRegistry) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	out := &v1beta1.ServiceRegistry{}
	Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(reg), out)).To(Succeed())
	return out
}

func condition(reg *v1beta1.ServiceRegistry, typ string) func() *metav1.Condition {
	return func() *metav1.Condition { return meta.FindStatusCondition(getRegistry(reg).Status.Conditions, typ) }
}

func haveStatus(status metav1.ConditionStatus) OmegaMatcher {
	return And(Not(BeNil()), WithTransform(func(c *metav1.Condition) metav1.ConditionStatus { return c.Status }, Equal(status)))
}

// readyPod creates a pod labelled app=<name prefix> and plays the kubelet: running and ready.
func readyPod(ns, name, ip string) *corev1.Pod {
	GinkgoHelper()
	app := name[:strings.LastIndex(name, "-")]
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	Expect(k8sClient.Create(context.Background(), pod)).To(Succeed())
	setPodStatus(pod, ip, true)
	return pod
}

func setPodStatus(pod *corev1.Pod, ip string, ready bool) {
	GinkgoHelper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase, cur.Status.PodIP, cur.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		cur.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		}
		return k8sClient.Status().Update(context.Background(), cur)
	})).To(Succeed())
}

// etcdPods lists the pods under the etcd store's {prefix}/{service}/{ns}/ with a separate client.
func etcdPods(service, ns string) []string {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	prefix := storePrefix + "/" + service + "/" + ns + "/"
	resp, err := storeClient.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	Expect(err).NotTo(HaveOccurred())
	pods := []string{}
	for _, kv := range resp.Kvs {
		pods = append(pods, strings.TrimPrefix(string(kv.Key), prefix))
	}
	return pods
}

func dnsQuery(name string, qtype uint16) (*dns.Msg, int) {
	GinkgoHelper()
	r, err := dnsServer.Query(name, qtype)
	Expect(err).NotTo(HaveOccurred())
	return r, r.Rcode
}

// dnsA is the sorted A answer for <service>.<ns>.<zone>.
func dnsA(service, ns string) []string {
	GinkgoHelper()
	r, _ := dnsQuery(service+"."+ns+"."+zone, dns.TypeA)
	ips := []string{}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	sort.Strings(ips)
	return ips
}

// dnsTTLs are the TTLs of the A answer for <service>.<ns>.<zone>.
func dnsTTLs(service, ns string) []uint32 {
	GinkgoHelper()
	r, _ := dnsQuery(service+"."+ns+"."+zone, dns.TypeA)
	ttls := []uint32{}
	for _, rr := range r.Answer {
		ttls = append(ttls, rr.Header().Ttl)
	}
	return ttls
}

// dnsSRV is the SRV answer for _<port>._tcp.<service>.<ns>.<zone> as "port target", and its TTL.
func dnsSRV(service, ns, port string) ([]string, uint32) {
	GinkgoHelper()
	r, _ := dnsQuery("_"+port+"._tcp."+service+"."+ns+"."+zone, dns.TypeSRV)
	var out []string
	var ttl uint32
	for _, rr := range r.Answer {
		if s, ok := rr.(*dns.SRV); ok {
			out = append(out, fmt.Sprintf("%d %s", s.Port, s.Target))
			ttl = s.Hdr.Ttl
		}
	}
	slices.Sort(out)
	return out, ttl
}
