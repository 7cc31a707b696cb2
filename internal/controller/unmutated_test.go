package controller_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 13, hole 13 (second half): the pod webhook's failurePolicy is Ignore, so a pod created
// while registrar was down is admitted without the gate and the preStop drain. A registry
// with injection enabled reports such pods: a condition, an Event and a metric.
var _ = Describe("Pods the webhook did not mutate", func() {
	It("are reported on the registry: PodsInjected=False, an Event and registrar_unmutated_pods", func() {
		ns := newNamespace()
		reg := newRegistry(ns, "web", "web")
		updateRegistry(reg, func(r *v1beta1.ServiceRegistry) {
			r.Spec.Injection = &v1beta1.InjectionSpec{Enabled: ptr.To(true)}
		})
		// created straight through the API: this suite runs no webhook, as if it were down
		readyPod(ns, "web-1", web, "10.6.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))

		Eventually(condition(reg, v1beta1.ConditionPodsInjected)).WithTimeout(timeout).
			Should(And(haveCondition(metav1.ConditionFalse, v1beta1.ReasonPodsNotInjected),
				HaveField("Message", ContainSubstring("web-1"))))
		Eventually(func() []string {
			var list eventsv1.EventList
			Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "ServiceRegistry" && e.Regarding.Name == "web" {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).WithTimeout(timeout).Should(ContainElement(v1beta1.ReasonPodsNotInjected))
		series := fmt.Sprintf(`registrar_unmutated_pods{namespace=%q,serviceregistry="web"}`, ns)
		Eventually(func() float64 { return scrape()[series] }).WithTimeout(timeout).Should(Equal(1.0))
	})
})
