package controller_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 13, hole 9: an older registry that is being deleted (here stuck finalizing on
// another controller's finalizer) claims no pod: the younger one publishes it.
var _ = Describe("Overlap with a registry being deleted", func() {
	It("lets the younger registry publish a pod the older, terminating one selects", func() {
		ctx := context.Background()
		ns := newNamespace()
		older := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-older",
			Finalizers: []string{"test.registrar.dev/hold"}},
			Spec: v1beta1.ServiceRegistrySpec{ServiceName: "shop", Selector: metav1.LabelSelector{MatchLabels: web}}}
		Expect(k8sClient.Create(ctx, older)).To(Succeed())
		DeferCleanup(func() {
			cur := getRegistry(older)
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Finalizers = nil
			_ = k8sClient.Patch(context.Background(), cur, patch)
		})
		younger := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b-younger"},
			Spec: v1beta1.ServiceRegistrySpec{ServiceName: "shop", Selector: metav1.LabelSelector{MatchLabels: web}}}
		Expect(k8sClient.Create(ctx, younger)).To(Succeed())
		DeferCleanup(deleteRegistry, younger)
		readyPod(ns, "web-1", web, "10.5.0.1")
		owner := func() string {
			ep, _ := storedEndpoint(key("shop", ns, "web-1"))
			if ep == nil {
				return ""
			}
			return ep.Owner
		}
		Eventually(owner).WithTimeout(timeout).Should(Equal(string(getRegistry(older).UID)))

		Expect(k8sClient.Delete(ctx, older)).To(Succeed()) // stuck on test.registrar.dev/hold
		Eventually(owner).WithTimeout(timeout).Should(Equal(string(getRegistry(younger).UID)),
			"the pod was left unpublished while the older registry is stuck finalizing")
		Eventually(condition(younger, v1beta1.ConditionReady)).WithTimeout(timeout).
			Should(haveCondition(metav1.ConditionTrue, "AllRegistered"))
	})
})
