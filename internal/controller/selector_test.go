package controller_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Issue 13, hole 8: an update to an invalid selector must not freeze the registry: the API
// server rejects it (naming spec.selector), and the registry goes on deregistering its pods.
var _ = Describe("Invalid selector update", func() {
	It("is rejected naming spec.selector, and the registry keeps deregistering pods that die", func() {
		ns := newNamespace()
		reg := newRegistry(ns, "web", "web")
		pod := readyPod(ns, "web-1", web, "10.0.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))

		cur := getRegistry(reg)
		patch := client.MergeFrom(cur.DeepCopy()) // no resourceVersion: the operator's status writes do not conflict
		cur.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn}}} // In without values
		updateErr := k8sClient.Patch(context.Background(), cur, patch)

		setPodStatus(pod, corev1.PodRunning, "10.0.0.1", false) // the pod dies
		eventuallyStored("web", ns).Should(BeEmpty(), "the endpoint of a dead pod stayed registered")
		Expect(updateErr).To(HaveOccurred(), "the API server accepted an invalid selector")
		Expect(updateErr.Error()).To(ContainSubstring("spec.selector"))
		Expect(getRegistry(reg).Spec.Selector.MatchLabels).To(Equal(web))
	})
})
