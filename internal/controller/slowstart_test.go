package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Slow start (issue 17): a newly registered endpoint's stored weight ramps from the minimum
// to full over the window, in at most one store write per step, with nothing but time
// passing; a registry without slow start writes no weight.
var _ = Describe("Slow start", func() {
	It("ramps a new pod's stored weight to full, one write per step", func() {
		ns := newNamespace()
		reg := newRegistry(ns, "ramp", "ramp")
		// 3 s: three steps of 1 s, weights 10, 40, 70, then 100.
		updateRegistry(reg, func(r *v1beta1.ServiceRegistry) {
			r.Spec.SlowStart = &v1beta1.SlowStartSpec{WindowSeconds: 3, MinWeightPercent: 10}
		})
		plain := newRegistry(ns, "plain", "plain")
		readyPod(ns, "plain-1", map[string]string{"app": "plain"}, "10.2.0.2")
		readyPod(ns, "ramp-1", map[string]string{"app": "ramp"}, "10.2.0.1")

		var weights []int32
		revisions := map[int64]bool{}
		Eventually(func(g Gomega) {
			ep, rev := storedEndpoint(key("ramp", ns, "ramp-1"))
			g.Expect(ep).NotTo(BeNil())
			revisions[rev] = true
			if len(weights) == 0 || weights[len(weights)-1] != ep.Weight {
				weights = append(weights, ep.Weight)
			}
			g.Expect(ep.Weight).To(Equal(int32(100)))
		}).WithTimeout(20 * time.Second).WithPolling(poll).Should(Succeed())
		GinkgoWriter.Printf("stored weights: %v in %d revisions\n", weights, len(revisions))
		Expect(weights[0]).To(Equal(int32(10)), "a new pod starts at the minimum: %v", weights)
		for i := 1; i < len(weights); i++ {
			Expect(weights[i]).To(BeNumerically(">", weights[i-1]), "the weight only grows: %v", weights)
			Expect(weights[i]).To(BeElementOf(int32(40), int32(70), int32(100)), "only step weights are written: %v", weights)
		}
		Expect(len(revisions)).To(BeNumerically("<=", 4), "at most one write per step (create + 3 steps)")

		// Full weight is final: no further writes.
		_, rev := storedEndpoint(key("ramp", ns, "ramp-1"))
		Consistently(func() int64 { _, r := storedEndpoint(key("ramp", ns, "ramp-1")); return r }).
			WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(rev))

		ep, _ := storedEndpoint(key("plain", ns, "plain-1"))
		Expect(ep).NotTo(BeNil())
		Expect(ep.Weight).To(BeZero(), "a registry without slow start writes no weight")
		_ = plain
	})
})
