package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Issue 13, hole 5: any node Lease renewal the operator sees after a lapse brings the node's
// pods back, whatever the kubelet's clock says; a registry whose every pod is on that node
// is requeued too.
var _ = Describe("Node Lease renewals with clock skew", func() {
	It("registers the pods of a node whose kubelet clock runs 30 s behind, as long as it keeps renewing", func() {
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		ns := newNamespace()
		newRegistry(ns, "web", "web")
		if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
		Expect(k8sClient.Create(ctx, n)).To(Succeed())
		const skew = 30 * time.Second
		lease := putLease(n.Name, time.Now().Add(-skew), 40)
		readyPod(ns, "web-1", web, "10.0.0.1", func(p *corev1.Pod) { p.Spec.NodeName = n.Name })

		// the kubelet renews every 500 ms, stamping its own (late) clock
		go func() {
			defer GinkgoRecover()
			for ctx.Err() == nil {
				_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
					cur := &coordinationv1.Lease{}
					if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(lease), cur); err != nil {
						return err
					}
					cur.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-skew)}
					return k8sClient.Update(ctx, cur)
				})
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		}()
		eventuallyStored("web", ns).Should(ConsistOf("web-1"), "a renewing node's pod stayed deregistered")
		Consistently(func() []string { return storedPods("web", ns) }).WithTimeout(3 * time.Second).Should(ConsistOf("web-1"))

		cancel() // the node dies: its pod leaves within the 20 s cap (plus slack)
		Eventually(func() []string { return storedPods("web", ns) }).WithTimeout(30 * time.Second).Should(BeEmpty())
	})
})
