package controller_test

import (
	"context"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 13, hole 6: with several registries selecting one gated pod, the gate means every one
// of them has warmed the pod up (where it asks for a warm-up) and its store holds the endpoint.
var _ = Describe("Gate with several registries", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("turns True only after the warm-up registry warmed the pod up and both stores hold it", func() {
		srv := startPodServer("127.0.0.31", http.StatusOK, 0)
		plain := &v1beta1.ServiceRegistry{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
			Spec: v1beta1.ServiceRegistrySpec{
				Selector: metav1.LabelSelector{MatchLabels: web},
				Ports:    []v1beta1.ServicePort{{Name: "http", TargetPort: "http"}},
			},
		}
		Expect(k8sClient.Create(context.Background(), plain)).To(Succeed())
		DeferCleanup(deleteRegistry, plain)
		newGatedRegistry(ns, "web", v1beta1.WarmupSpec{
			Paths: []string{"/warm"}, Requests: 4, Concurrency: 1,
			MinDurationMillis: ptr.To[int32](1500),
		})
		gatesWeb := watchGates(ns, "web")
		gatesPlain := watchGates(ns, "plain")

		pod := gatedPod(ns, "web-1", srv)
		// The warm-up cannot start before the pod is ready; its minDuration runs from its
		// start, which precedes the server's receipt of the first request by a connection
		// set-up (CI saw the gate 1.2 ms before first request + minDuration).
		readyAt := time.Now()
		setPodStatus(pod, corev1.PodRunning, srv.ip, true)

		Eventually(gatesWeb.trueAt("web-1")).WithTimeout(timeout).ShouldNot(BeZero())
		Eventually(gatesPlain.trueAt("web-1")).WithTimeout(timeout).ShouldNot(BeZero())
		Expect(gatesWeb.violations()).To(BeEmpty(), "gate True before the warm-up registry's store held the endpoint")
		Expect(gatesPlain.violations()).To(BeEmpty(), "gate True before the plain registry's store held the endpoint")
		Expect(srv.count()).To(Equal(4), "the warm-up registry skipped its warm-up")
		Expect(gatesWeb.trueAt("web-1")()).To(BeTemporally(">=", readyAt.Add(1500*time.Millisecond)),
			"gate True before the warm-up's minDuration")
	})
})
