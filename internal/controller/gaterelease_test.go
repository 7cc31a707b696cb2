package controller_test

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 13, hole 7: a gated pod whose gate registrar no longer manages must not be stranded
// with its gate False (the pod would never become Ready and its rollout would stall).
var _ = Describe("Gate release", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	// warming starts a pod whose warm-up never ends (a slow server and many requests).
	warming := func(reg *v1beta1.ServiceRegistry, ip string) *corev1.Pod {
		GinkgoHelper()
		srv := startPodServer(ip, http.StatusOK, 200*time.Millisecond)
		pod := gatedPod(ns, "web-1", srv)
		setPodStatus(pod, corev1.PodRunning, srv.ip, true)
		Eventually(srv.count).WithTimeout(timeout).Should(BeNumerically(">=", 1), "warm-up did not start")
		Expect(gateOf(pod).Status).NotTo(Equal(corev1.ConditionTrue))
		return pod
	}
	slowWarmup := v1beta1.WarmupSpec{Paths: []string{"/warm"}, Requests: 10000, Concurrency: 1,
		TimeoutMillis: 3600000}

	It("releases the gate of a pod whose registry is deleted mid-warm-up", func() {
		reg := newGatedRegistry(ns, "web", slowWarmup)
		pod := warming(reg, "127.0.0.21")

		deleteRegistry(reg)
		Eventually(func() corev1.ConditionStatus { return gateOf(pod).Status }).WithTimeout(timeout).
			Should(Equal(corev1.ConditionTrue), "the gate of a pod no registry manages stayed False")
		Expect(gateOf(pod).Reason).To(Equal(v1beta1.GateReleased))
		Expect(gateOf(pod).Message).To(ContainSubstring("no ServiceRegistry"))
		Eventually(podEventReasons(ns, "web-1")).WithTimeout(timeout).Should(ContainElement("GateReleased"))
		Expect(storedPods("web", ns)).To(BeEmpty())
	})

	It("releases the gate of a pod the registry stops selecting", func() {
		reg := newGatedRegistry(ns, "web", slowWarmup)
		pod := warming(reg, "127.0.0.22")

		updateRegistry(reg, func(r *v1beta1.ServiceRegistry) {
			r.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
		})
		Eventually(func() corev1.ConditionStatus { return gateOf(pod).Status }).WithTimeout(timeout).
			Should(Equal(corev1.ConditionTrue), "the gate of a pod no registry selects stayed False")
		Expect(gateOf(pod).Reason).To(Equal(v1beta1.GateReleased))
	})

	It("does not release the gate of a pod a registry still warms up", func() {
		reg := newGatedRegistry(ns, "web", slowWarmup)
		pod := warming(reg, "127.0.0.23")
		Consistently(func() corev1.ConditionStatus { return gateOf(pod).Status }).WithTimeout(2 * time.Second).
			ShouldNot(Equal(corev1.ConditionTrue))
	})

})
