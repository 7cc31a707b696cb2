package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	testmetrics "github.com/registrar-dev/registrar/test/support/metrics"
)

var _ = Describe("Metrics", func() {
	It("serves registrar's series on the manager's metrics endpoint, and they move", func() {
		ns := newNamespace()
		before := scrape() // before the registry: its first reconcile lists the store
		newRegistry(ns, "web", "web")
		pod := readyPod(ns, "web-1", web, "10.0.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Eventually(func() float64 {
			return scrape()[`registrar_endpoints{namespace="`+ns+`",serviceregistry="web",state="Registered"}`]
		}).WithTimeout(timeout).Should(Equal(1.0))

		setPodStatus(pod, corev1.PodRunning, "10.0.0.1", false)
		eventuallyStored("web", ns).Should(BeEmpty())
		Eventually(func(g Gomega) {
			after := scrape()
			for _, series := range []string{
				`registrar_store_operation_duration_seconds_count{operation="apply"}`,
				`registrar_store_operation_duration_seconds_count{operation="list"}`,
				`registrar_deregistration_lag_seconds_count`,
				`registrar_registration_lag_seconds_count`,
			} {
				g.Expect(after[series]).To(BeNumerically(">", before[series]), series)
			}
			g.Expect(after[`registrar_endpoints{namespace="`+ns+`",serviceregistry="web",state="Unready"}`]).To(Equal(1.0))
		}).WithTimeout(timeout).Should(Succeed())
	})
})

// scrape reads the operator's /metrics into series → value (no HELP/TYPE lines).
func scrape() map[string]float64 {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ss, err := testmetrics.Scrape(ctx, metricsAddr)
	Expect(err).NotTo(HaveOccurred())
	return ss.BySeries()
}
