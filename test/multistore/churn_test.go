package multistore_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	corednsstore "github.com/registrar-dev/registrar/internal/store/coredns"
)

const corednsPrefix = corednsstore.DefaultPrefix

// One store down must never hold back another (issue 13, hole 2): each store is planned,
// applied and reported on its own, under churn, not only for the first change after the
// outage.
var _ = Describe("One store down while pods churn", Serial, func() {
	It("keeps the healthy store exact and reports each store on its own", func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "churn-"}}
		Expect(k8sClient.Create(context.Background(), n)).To(Succeed())
		ns := n.Name
		reg := newRegistry(ns, "churn", []string{"etcd", "coredns"})
		const size = 12
		pods := map[string]*corev1.Pod{}
		ips := map[string]string{}
		ip := func(i int) string { return fmt.Sprintf("10.9.%d.%d", i/200, i%200+1) }
		for i := range size {
			name := fmt.Sprintf("churn-%d", i)
			pods[name], ips[name] = readyPod(ns, name, ip(i)), ip(i)
		}
		ready := func() []string {
			var out []string
			for name := range pods {
				out = append(out, name)
			}
			slices.Sort(out)
			return out
		}
		Eventually(func() []string { return etcdPods("churn", ns) }).WithTimeout(timeout).Should(Equal(ready()))
		Eventually(func() []string { return dnsA("churn", ns) }).WithTimeout(timeout).Should(HaveLen(size))

		dnsEtcd.Stop()
		DeferCleanup(func() { Expect(dnsEtcd.Resume()).To(Succeed()) })
		next := size
		start := time.Now()
		for round := range 5 {
			// Each round: one pod turns unready, one is deleted, one new pod joins.
			names := ready()
			unready, deleted := names[0], names[1]
			setPodStatus(pods[unready], ips[unready], false)
			delete(pods, unready)
			Expect(k8sClient.Delete(context.Background(), pods[deleted], client.GracePeriodSeconds(0))).To(Succeed())
			delete(pods, deleted)
			name := fmt.Sprintf("churn-%d", next)
			pods[name], ips[name] = readyPod(ns, name, ip(next)), ip(next)
			next++
			want := ready()
			Eventually(func() []string { return etcdPods("churn", ns) }).WithTimeout(timeout).
				Should(Equal(want), "round %d: the healthy etcd store must hold exactly the ready pods", round)
		}
		GinkgoWriter.Printf("5 churn rounds with coredns down: etcd exact after each, %s in all\n", time.Since(start))
		Eventually(func() []v1beta1.StoreStatus { return getRegistry(reg).Status.Stores }).WithTimeout(timeout).Should(ConsistOf(
			v1beta1.StoreStatus{Name: "etcd", Registered: int32(len(pods)), Synced: true},
			And(HaveField("Name", "coredns"), HaveField("Synced", false), HaveField("Message", ContainSubstring("coredns"))),
		))

		Expect(dnsEtcd.Resume()).To(Succeed())
		Eventually(func(g Gomega) {
			// CoreDNS may time out while its etcd client reconnects: retried, not fatal.
			r, err := dnsServer.Query("churn."+ns+"."+zone, dns.TypeA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Answer).To(HaveLen(len(pods)))
		}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
		Eventually(func() []v1beta1.StoreStatus { return getRegistry(reg).Status.Stores }).WithTimeout(timeout).Should(ConsistOf(
			v1beta1.StoreStatus{Name: "etcd", Registered: int32(len(pods)), Synced: true},
			v1beta1.StoreStatus{Name: "coredns", Registered: int32(len(pods)), Synced: true},
		))
		deleteRegistry(reg)
	})
})

// The DNS store is watched too (issue 13, hole 3): a record deleted by hand is written again.
var _ = Describe("A DNS record changed behind registrar's back", Serial, func() {
	It("is repaired", func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "dnsfix-"}}
		Expect(k8sClient.Create(context.Background(), n)).To(Succeed())
		ns := n.Name
		reg := newRegistry(ns, "fix", []string{"etcd", "coredns"})
		readyPod(ns, "fix-0", "10.7.0.1")
		readyPod(ns, "fix-1", "10.7.0.2")
		Eventually(func() []string { return dnsA("fix", ns) }).WithTimeout(timeout).Should(Equal([]string{"10.7.0.1", "10.7.0.2"}))
		cli, err := dnsEtcd.Client()
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = cli.Close() }()
		key := fmt.Sprintf("%s/test/registrar/%s/fix/_tcp/_http/fix-0", corednsPrefix, ns)
		resp, err := cli.Delete(context.Background(), key)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Deleted).To(Equal(int64(1)), "no record at %s", key)
		start := time.Now()
		Eventually(func() int64 {
			got, err := cli.Get(context.Background(), key, clientv3.WithCountOnly())
			Expect(err).NotTo(HaveOccurred())
			return got.Count
		}).WithTimeout(timeout).WithPolling(10*time.Millisecond).Should(Equal(int64(1)), "the deleted DNS record was not written again")
		GinkgoWriter.Printf("deleted DNS record repaired in %s\n", time.Since(start))
		Expect(dnsA("fix", ns)).To(Equal([]string{"10.7.0.1", "10.7.0.2"}))
		deleteRegistry(reg)
	})
})
