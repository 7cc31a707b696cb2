package controller_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 34, defect 4: a service name belongs to one namespace, that of its oldest registry.
// A registry of another namespace claiming the name is refused (nothing of it in the store,
// its pods' gates not True, Ready=False naming the owner) until the owner shares the name
// with its namespace (spec.sharing.namespaces) or the owner is gone.
var _ = Describe("Service name tenancy", func() {
	It("refuses another namespace's registry of an owned service name until the owner shares it or is deleted", func() {
		ctx := context.Background()
		nsA := newNamespace()
		// nsB sorts after nsA, so A is the owner even when both are created within the same
		// second (the order is creationTimestamp, then namespace, then name).
		nsB := nsA + "-b"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsB}})).To(Succeed())
		service := "orders-" + nsA[len(nsA)-5:]
		orders := map[string]string{"app": "orders"}
		registry := func(ns, name string) *v1beta1.ServiceRegistry {
			reg := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: v1beta1.ServiceRegistrySpec{ServiceName: service, Selector: metav1.LabelSelector{MatchLabels: orders},
					Ports: []v1beta1.ServicePort{{Name: "http", Port: 8080}}}}
			Expect(k8sClient.Create(ctx, reg)).To(Succeed())
			DeferCleanup(deleteRegistry, reg)
			return reg
		}

		a := registry(nsA, "a")
		readyPod(nsA, "orders-a", orders, "10.34.0.1")
		eventuallyStored(service, nsA).Should(ConsistOf("orders-a"))

		b := registry(nsB, "b")
		podB := readyPod(nsB, "orders-b", orders, "10.34.0.2", func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}
		})
		Eventually(condition(b, v1beta1.ConditionReady)).WithTimeout(timeout).WithPolling(poll).
			Should(And(haveCondition(metav1.ConditionFalse, "ServiceNameOwnedElsewhere"),
				WithTransform(func(c *metav1.Condition) string { return c.Message }, ContainSubstring(nsA+"/a"))))
		Expect(getRegistry(b).Status.Conditions).To(ContainElement(And(
			HaveField("Type", v1beta1.ConditionStalled), HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", "ServiceNameOwnedElsewhere"))))
		Consistently(func() []string { return storedPods(service, nsB) }).WithTimeout(2*time.Second).WithPolling(poll).
			Should(BeEmpty(), "a registry of another namespace joined the owner's service")
		Expect(storedPods(service, nsA)).To(ConsistOf("orders-a"), "the owner's endpoints are untouched")
		Expect(gateOf(podB).Status).NotTo(Equal(corev1.ConditionTrue), "the refused registry released its pod's gate")
		Eventually(func() *corev1.PodCondition { return gateOf(podB) }).WithTimeout(timeout).WithPolling(poll).Should(And(
			HaveField("Status", corev1.ConditionFalse), HaveField("Reason", v1beta1.GateServiceNameOwnedElsewhere)))
		Eventually(func() []string {
			var list eventsv1.EventList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(nsB))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "ServiceRegistry" && e.Regarding.Name == "b" && e.Reason == v1beta1.ReasonServiceNameOwnedElsewhere {
					notes = append(notes, e.Type+": "+e.Note)
				}
			}
			return notes
		}).WithTimeout(timeout).WithPolling(poll).Should(ContainElement(And(HavePrefix("Warning: "), ContainSubstring(nsA+"/a"))))

		By("the owner sharing the name with the other namespace")
		share := func(namespaces ...string) {
			raw := []byte(`{"spec":{"sharing":null}}`)
			if len(namespaces) > 0 {
				raw = []byte(fmt.Sprintf(`{"spec":{"sharing":{"namespaces":[%q]}}}`, namespaces[0]))
			}
			Expect(k8sClient.Patch(ctx, getRegistry(a), client.RawPatch(types.MergePatchType, raw))).To(Succeed())
		}
		share(nsB)
		eventuallyStored(service, nsB).Should(ConsistOf("orders-b"))
		Eventually(condition(b, v1beta1.ConditionReady)).WithTimeout(timeout).WithPolling(poll).
			Should(haveCondition(metav1.ConditionTrue, "AllRegistered"))
		Eventually(func() corev1.ConditionStatus { return gateOf(podB).Status }).WithTimeout(timeout).WithPolling(poll).
			Should(Equal(corev1.ConditionTrue))

		By("the owner withdrawing the share: the other namespace's endpoints leave the store")
		share()
		eventuallyStored(service, nsB).Should(BeEmpty())
		Expect(storedPods(service, nsA)).To(ConsistOf("orders-a"))
		Eventually(condition(b, v1beta1.ConditionReady)).WithTimeout(timeout).WithPolling(poll).
			Should(haveCondition(metav1.ConditionFalse, "ServiceNameOwnedElsewhere"))

		By("the owner being deleted: the other namespace's registry owns the name")
		deleteRegistry(a)
		eventuallyStored(service, nsA).Should(BeEmpty())
		eventuallyStored(service, nsB).Should(ConsistOf("orders-b"))
		Eventually(condition(b, v1beta1.ConditionReady)).WithTimeout(timeout).WithPolling(poll).
			Should(haveCondition(metav1.ConditionTrue, "AllRegistered"))
	})
})
