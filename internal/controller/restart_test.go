package controller_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/store"
)

// These specs stop and start the suite's operator or store, so they run alone.
var _ = Describe("Operator restarts and store outages", Serial, func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace()
	})

	It("converges a store with stale and missing keys after a restart, without rewriting live endpoints", func() {
		reg := newRegistry(ns, "web", "web")
		readyPod(ns, "web-1", web, "10.0.0.1")
		readyPod(ns, "web-2", web, "10.0.0.2")
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"))
		owner := string(getRegistry(reg).UID)

		operator.stop()
		_, liveRev := storedEndpoint(key("web", ns, "web-1"))
		_, err := storeClient.Delete(ctx, key("web", ns, "web-2"))
		Expect(err).NotTo(HaveOccurred())
		putRaw(key("web", ns, "ghost"), store.Endpoint{Service: "web", Namespace: ns, Pod: "ghost", Owner: owner})
		putRaw(key("web", ns, "foreign"), store.Endpoint{Pod: "foreign", Owner: "another-installation"})
		events := recordEvents(key("web", ns, ""))

		operator = startOperator()
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2", "foreign"))
		_, revAfter := storedEndpoint(key("web", ns, "web-1"))
		Expect(revAfter).To(Equal(liveRev), "a live endpoint was rewritten on restart")
		Expect(events()).NotTo(ContainElement(HavePrefix(key("web", ns, "web-1"))),
			"a live endpoint was touched on restart")
		Eventually(events).WithTimeout(timeout).Should(ConsistOf("PUT "+key("web", ns, "web-2"), "DELETE "+key("web", ns, "ghost")))
	})

	It("reports StoreSynced=False while the store is unreachable at start, and recovers when it returns", func() {
		operator.stop()
		storeServer.Stop()
		DeferCleanup(func() { Expect(storeServer.Resume()).To(Succeed()) })
		operator = startOperator()

		reg := newRegistry(ns, "web", "web")
		readyPod(ns, "web-1", web, "10.0.0.1")
		Eventually(condition(reg, v1alpha1.ConditionStoreSynced)).WithTimeout(timeout).Should(
			And(haveCondition(metav1.ConditionFalse, "StoreUnreachable"),
				HaveField("Message", ContainSubstring(storeServer.Endpoint()))))
		Expect(condition(reg, v1alpha1.ConditionReady)()).To(haveCondition(metav1.ConditionFalse, "StoreNotSynced"))

		Expect(storeServer.Resume()).To(Succeed())
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Eventually(condition(reg, v1alpha1.ConditionStoreSynced)).WithTimeout(timeout).Should(haveCondition(metav1.ConditionTrue, "Synced"))
		Eventually(condition(reg, v1alpha1.ConditionReady)).WithTimeout(timeout).Should(haveCondition(metav1.ConditionTrue, "AllRegistered"))
	})
})

// recordEvents watches a key prefix from now and returns a function listing the events
// seen so far as "PUT key" / "DELETE key".
func recordEvents(prefix string) func() []string {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	wch := storeClient.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	Expect((<-wch).Created).To(BeTrue(), "store watch not established")
	seen := make(chan string, 1024)
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				seen <- ev.Type.String() + " " + string(ev.Kv.Key)
			}
		}
	}()
	var got []string
	return func() []string {
		for {
			select {
			case e := <-seen:
				got = append(got, e)
			default:
				return got
			}
		}
	}
}
