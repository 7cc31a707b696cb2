package multicluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/pkg/wire"
)

var _ = Describe("Several clusters sharing one store", Ordered, func() {
	const service = "web"
	var regs = map[string]*v1beta1.ServiceRegistry{}

	BeforeAll(func() {
		for id, m := range clusters {
			regs[id] = newRegistry(m, ns, service)
			for i := range 3 {
				readyPod(m, ns, fmt.Sprintf("web-%d", i), podIP(id, i))
			}
		}
	})

	It("publishes the same service and pod names from each cluster under its own keys", func() {
		for id := range clusters {
			Eventually(func() []string { return storePods(service, id) }).WithTimeout(timeout).WithPolling(poll).
				Should(Equal([]string{"web-0", "web-1", "web-2"}), "cluster %s", id)
		}
		keys := storeKeys(service)
		Expect(keys).To(ContainElements(
			storePrefix+"/web/shop/east.web-0", storePrefix+"/web/shop/west.web-0"))
		for _, id := range []string{"east", "west"} {
			Eventually(condition(clusters[id], regs[id], v1beta1.ConditionStoreSynced)).WithTimeout(timeout).Should(haveStatus(metav1.ConditionTrue))
			Expect(storeValue(wire.ClusterFenceKey(storePrefix, id))).To(ContainSubstring(`"installation":"inst-` + id + `"`))
		}
		expectClean()
	})

	It("keeps each cluster's records to itself while both churn", func() {
		var wg sync.WaitGroup
		for id, m := range clusters {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				churn(m, id, 40)
			}()
		}
		wg.Wait()
		for id, m := range clusters {
			Eventually(func() []string { return storePods(service, id) }).WithTimeout(timeout).WithPolling(poll).
				Should(Equal(readyPods(m, ns)), "cluster %s: the store holds exactly its ready pods", id)
		}
		expectClean()
		for id, m := range clusters {
			m.op.audit.mu.Lock()
			GinkgoWriter.Printf("cluster %s: %d mutations sent, 0 of other clusters' keys\n", id, m.op.audit.writes)
			m.op.audit.mu.Unlock()
		}
	})

	It("refuses a second installation that claims a cluster's identity, and writes nothing", func() {
		// An installation in cluster west's "clash" namespace misconfigured with east's ID.
		m := clusters["west"]
		bad := startOperator(m, "east", "inst-misconfigured", "clash")
		DeferCleanup(bad.kill)
		reg := newRegistry(m, "clash", service)
		readyPod(m, "clash", "web-0", "10.99.0.1")
		Eventually(condition(m, reg, v1beta1.ConditionStoreSynced)).WithTimeout(timeout).Should(And(
			haveStatus(metav1.ConditionFalse),
			WithTransform(func(c *metav1.Condition) string { return c.Reason }, Equal(v1beta1.ReasonClusterIdentityClash)),
			WithTransform(func(c *metav1.Condition) string { return c.Message }, And(
				ContainSubstring(`held by installation "inst-east"`), ContainSubstring("--cluster-id")))))
		Eventually(func() []string { return eventReasons(m, "clash", reg.Name) }).WithTimeout(timeout).
			Should(ContainElement(v1beta1.ReasonClusterIdentityClash))
		Consistently(func() []string { return storePods(service, "east") }).WithTimeout(2 * time.Second).
			ShouldNot(ContainElement(ContainSubstring("10.99")))
		Expect(storeNamespaces(service)).NotTo(ContainElement("clash"))
		bad.audit.mu.Lock()
		Expect(bad.audit.writes).To(BeZero(), "the refused installation sent writes")
		bad.audit.mu.Unlock()
		Expect(storeValue(wire.ClusterFenceKey(storePrefix, "east"))).To(ContainSubstring(`"installation":"inst-east"`))
		expectClean()
	})

	It("keeps a partitioned cluster's records until the TTL and converges on return without rewriting them", func() {
		if !full {
			Skip("MULTICLUSTER_FULL=1 (make test-multicluster) runs the partition")
		}
		east, west := clusters["east"], clusters["west"]
		readyPod(east, ns, "web-9", "10.11.0.9") // whatever the churn left, east has this one
		Eventually(func() []string { return storePods(service, "east") }).WithTimeout(timeout).Should(Equal(readyPods(east, ns)))
		before := storeRevision()
		kept := readyPods(east, ns)
		east.proxy.Cut()
		// While cut off: east's pods change, west churns on.
		gone := "web-9"
		deletePod(east, ns, gone)
		readyPod(east, ns, "web-new", "10.11.0.99")
		churn(west, "west", 10)
		time.Sleep(leaseTTL / 4) // the partition's length is the scenario, not a synchronisation
		Expect(storePods(service, "east")).To(Equal(kept), "a partitioned cluster's records stay until its lease's TTL")
		east.proxy.Restore()
		want := readyPods(east, ns)
		Eventually(func() []string { return storePods(service, "east") }).WithTimeout(timeout).WithPolling(poll).Should(Equal(want))
		Eventually(func() []string { return storePods(service, "west") }).WithTimeout(timeout).Should(Equal(readyPods(west, ns)))
		// East wrote exactly the difference: one delete, one create; the pods that stayed
		// were not written again.
		var eastEvents []string
		for _, e := range watch.Since(before) {
			if e.Cluster == "east" {
				op := "put"
				if e.Deleted {
					op = "delete"
				}
				eastEvents = append(eastEvents, op+" "+e.Key[strings.LastIndex(e.Key, "/")+1:])
			}
		}
		Expect(eastEvents).To(ConsistOf("delete east."+gone, "put east.web-new"))
		expectClean()

		// Cut off for longer than the TTL: east's records expire (its lease lapses at the
		// store), west's stay; on return east writes each of its records once.
		westPods := readyPods(west, ns)
		Eventually(func() []string { return storePods(service, "west") }).WithTimeout(timeout).Should(Equal(westPods))
		before = storeRevision()
		east.proxy.Cut()
		Eventually(func() []string { return storePods(service, "east") }).WithTimeout(leaseTTL+timeout).WithPolling(100*time.Millisecond).
			Should(BeEmpty(), "a cluster cut off beyond its TTL ages out")
		Expect(storePods(service, "west")).To(Equal(westPods), "west's records untouched")
		east.proxy.Restore()
		want = readyPods(east, ns)
		Eventually(func() []string { return storePods(service, "east") }).WithTimeout(timeout).WithPolling(poll).Should(Equal(want))
		puts := map[string]int{}
		for _, e := range watch.Since(before) {
			Expect(e.Cluster).To(Equal("east"), "an event on another cluster's key: %+v", e)
			if !e.Deleted {
				puts[e.Key]++
			}
		}
		webPuts := 0
		for key := range puts {
			if strings.HasPrefix(key, wire.ScopePrefix(storePrefix, service, ns)) {
				webPuts++
			}
		}
		Expect(webPuts).To(Equal(len(want)), "east's web records written again after the return: %v", puts)
		for key, n := range puts { // every east record of every service (all share east's lease)
			Expect(n).To(Equal(1), "%s written %d times after the return", key, n)
		}
		expectClean()
	})

	It("ages out only the records of a cluster whose registrar is gone longer than the TTL", func() {
		if !full {
			Skip("MULTICLUSTER_FULL=1 (make test-multicluster) runs the operator kill")
		}
		east, west := clusters["east"], clusters["west"]
		readyPod(east, ns, "web-8", "10.11.0.8") // whatever ran before, east has records to lose
		Eventually(func() []string { return storePods(service, "east") }).WithTimeout(timeout).Should(Equal(readyPods(east, ns)))
		westPods := readyPods(west, ns)
		Eventually(func() []string { return storePods(service, "west") }).WithTimeout(timeout).Should(Equal(westPods))
		before := storeRevision()
		killed := time.Now()
		east.op.kill()
		Eventually(func() []string { return storePods(service, "east") }).WithTimeout(leaseTTL + timeout).WithPolling(100 * time.Millisecond).
			Should(BeEmpty())
		expired := time.Since(killed)
		GinkgoWriter.Printf("east's registrar killed -> its records expired: %s (TTL %s)\n", expired, leaseTTL)
		AddReportEntry("killed -> records expired", expired.String())
		// The lease expires TTL after the last keep-alive, which the client sends every TTL/3:
		// between 2/3 of the TTL and the TTL after the kill (less a little for the lease's
		// one-second granularity).
		Expect(expired).To(BeNumerically(">=", leaseTTL*2/3-time.Second), "expired long before the TTL")
		Expect(storePods(service, "west")).To(Equal(westPods), "west's records untouched")
		for _, e := range watch.Since(before) {
			Expect(e.Cluster).To(Equal("east"), "an event on another cluster's key while east expired: %+v", e)
			Expect(e.Deleted).To(BeTrue())
		}
		// East returns: its registrar writes its records again.
		east.op = startOperator(east, "east", "inst-east", ns)
		Eventually(func() []string { return storePods(service, "east") }).WithTimeout(timeout).Should(Equal(readyPods(east, ns)))
		expectClean()
	})
})

// churn plays the kubelet and the users of cluster m for steps steps: pods turn unready and
// ready again, are deleted and created.
func churn(m *member, id string, steps int) {
	GinkgoHelper()
	for step := range steps {
		name := fmt.Sprintf("web-%d", rand.IntN(5))
		pod := &corev1.Pod{}
		err := m.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod)
		switch {
		case apierrors.IsNotFound(err):
			readyPod(m, ns, name, podIP(id, step+10))
		case err != nil:
			Expect(err).NotTo(HaveOccurred())
		case pod.DeletionTimestamp != nil:
		case step%3 == 0:
			deletePod(m, ns, name)
		default:
			setPodStatus(m, pod, pod.Status.PodIP, !isReady(pod))
		}
		time.Sleep(20 * time.Millisecond) // pacing of the churn, not a synchronisation
	}
}

func podIP(cluster string, i int) string {
	if cluster == "east" {
		return fmt.Sprintf("10.11.0.%d", i+1)
	}
	return fmt.Sprintf("10.12.0.%d", i+1)
}

func isReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyPods are the names of the ready, non-terminating pods of service web in namespace in m.
func readyPods(m *member, namespace string) []string {
	GinkgoHelper()
	var list corev1.PodList
	Expect(m.env.Client.List(context.Background(), &list, client.InNamespace(namespace), client.MatchingLabels{"app": "web"})).To(Succeed())
	out := []string{}
	for i := range list.Items {
		if p := &list.Items[i]; isReady(p) && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

func newRegistry(m *member, namespace, name string) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	return newRegistryPort(m, namespace, name, 8080)
}

func newRegistryPort(m *member, namespace, name string, port int32) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Ports:    []v1beta1.ServicePort{{Name: "http", Port: port}},
		},
	}
	Expect(m.env.Client.Create(context.Background(), reg)).To(Succeed())
	return reg
}

func condition(m *member, reg *v1beta1.ServiceRegistry, typ string) func() *metav1.Condition {
	return func() *metav1.Condition {
		out := &v1beta1.ServiceRegistry{}
		if err := m.env.Client.Get(context.Background(), client.ObjectKeyFromObject(reg), out); err != nil {
			return nil
		}
		return meta.FindStatusCondition(out.Status.Conditions, typ)
	}
}

func haveStatus(status metav1.ConditionStatus) OmegaMatcher {
	return And(Not(BeNil()), WithTransform(func(c *metav1.Condition) metav1.ConditionStatus { return c.Status }, Equal(status)))
}

// eventReasons are the reasons of the Events about the object named name in namespace.
func eventReasons(m *member, namespace, name string) []string {
	var list eventsv1.EventList
	if err := m.env.Client.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// readyPod creates a pod labelled app=<name up to its last dash> and plays the kubelet:
// running and ready.
func readyPod(m *member, namespace, name, ip string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": name[:strings.LastIndex(name, "-")]}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	Expect(m.env.Client.Create(context.Background(), pod)).To(Succeed())
	setPodStatus(m, pod, ip, true)
	return pod
}

func deletePod(m *member, namespace, name string) {
	GinkgoHelper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	Expect(client.IgnoreNotFound(m.env.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)))).To(Succeed())
}

func setPodStatus(m *member, pod *corev1.Pod, ip string, ready bool) {
	GinkgoHelper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := m.env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase, cur.Status.PodIP, cur.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		cur.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		}
		return m.env.Client.Status().Update(context.Background(), cur)
	})).To(Succeed())
}

func storeGet(prefix string) *clientv3.GetResponse {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := storeClient.Get(ctx, prefix, clientv3.WithPrefix())
	Expect(err).NotTo(HaveOccurred())
	return resp
}

// storePods are the pods of cluster's records of service in ns, read with a separate client.
func storePods(service, cluster string) []string {
	GinkgoHelper()
	out := []string{}
	for _, kv := range storeGet(wire.ScopePrefix(storePrefix, service, ns) + cluster + ".").Kvs {
		ep, err := wire.Decode(kv.Value)
		Expect(err).NotTo(HaveOccurred())
		Expect(ep.Cluster).To(Equal(cluster))
		out = append(out, ep.Pod)
	}
	slices.Sort(out)
	return out
}

func storeKeys(service string) []string {
	var out []string
	for _, kv := range storeGet(wire.ServicePrefix(storePrefix, service)).Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

func storeNamespaces(service string) []string {
	var out []string
	for _, kv := range storeGet(wire.ServicePrefix(storePrefix, service)).Kvs {
		ep, _ := wire.Decode(kv.Value)
		out = append(out, ep.Namespace)
	}
	return out
}

func storeValue(key string) string {
	GinkgoHelper()
	resp := storeGet(key)
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func storeRevision() int64 {
	GinkgoHelper()
	return storeGet("/revision-probe").Header.Revision
}

func podNamed(m *member, name string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{}
	Expect(m.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
	return pod
}
