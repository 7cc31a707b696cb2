package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
)

// Anti-entropy (issue 13, hole 3): an owned key that anything else deletes or rewrites is
// repaired without any pod or registry change, while foreign keys stay untouched.
var _ = Describe("Keeping the store true", func() {
	It("repairs an owned key deleted and one rewritten by hand, and leaves foreign keys alone", func() {
		ctx := context.Background()
		ns := newNamespace()
		reg := newRegistry(ns, "web", "web")
		readyPod(ns, "web-1", web, "10.0.0.1")
		readyPod(ns, "web-2", web, "10.0.0.2")
		readyPod(ns, "web-3", web, "10.0.0.3")
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2", "web-3"))
		owner := string(getRegistry(reg).UID)
		foreign := store.Endpoint{Service: "web", Namespace: ns, Pod: "foreign", Address: "10.9.9.9", Owner: "another-installation"}
		putRaw(key("web", ns, "foreign"), foreign)
		want, _ := storedEndpoint(key("web", ns, "web-2"))
		Expect(want).NotTo(BeNil())

		start := time.Now()
		_, err := storeClient.Delete(ctx, key("web", ns, "web-1"))
		Expect(err).NotTo(HaveOccurred())
		rewritten := *want
		rewritten.Address = "10.6.6.6" // a person or a tool rewrote it, keeping the owner
		putRaw(key("web", ns, "web-2"), rewritten)

		Eventually(func(g Gomega) {
			one, _ := storedEndpoint(key("web", ns, "web-1"))
			g.Expect(one).NotTo(BeNil(), "deleted key not repaired")
			g.Expect(one.Address).To(Equal("10.0.0.1"))
			g.Expect(one.Owner).To(Equal(owner))
			two, _ := storedEndpoint(key("web", ns, "web-2"))
			g.Expect(two).NotTo(BeNil())
			g.Expect(two.Address).To(Equal("10.0.0.2"), "rewritten key not repaired")
		}).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Succeed())
		took := time.Since(start)
		GinkgoWriter.Printf("deleted + rewritten owned keys repaired in %s\n", took)
		AddReportEntry("owned keys repaired", took.String())

		got, _ := storedEndpoint(key("web", ns, "foreign"))
		Expect(got).NotTo(BeNil())
		Expect(*got).To(Equal(foreign), "a foreign key was touched")
		Expect(storedPods("web", ns)).To(ConsistOf("web-1", "web-2", "web-3", "foreign"))
		Eventually(func() []string {
			var list eventsv1.EventList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "ServiceRegistry" && e.Reason == v1beta1.EventStoreRepaired {
					notes = append(notes, e.Note)
				}
			}
			return notes
		}).WithTimeout(timeout).Should(ContainElement(ContainSubstring("changed outside registrar")))
		Eventually(func() float64 {
			m := scrape()
			return m[`registrar_store_repairs_total{kind="deleted",store="etcd"}`] + m[`registrar_store_repairs_total{kind="rewritten",store="etcd"}`]
		}).WithTimeout(timeout).Should(BeNumerically(">=", 2))
	})
})
