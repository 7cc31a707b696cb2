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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

var _ = Describe("Node Leases", func() {
	var (
		ctx  context.Context
		ns   string
		reg  *v1beta1.ServiceRegistry
		node string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace()
		reg = newRegistry(ns, "web", "web")
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
		Expect(k8sClient.Create(ctx, n)).To(Succeed())
		node = n.Name
		leaseNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}
		if err := k8sClient.Create(ctx, leaseNS); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	})

	onNode := func(p *corev1.Pod) { p.Spec.NodeName = node }

	It("deregisters the pods of a node whose Lease lapsed, and registers them again when it is renewed", func() {
		lease := putLease(node, time.Now().Add(-time.Minute), 40)
		readyPod(ns, "web-1", web, "10.0.0.1", onNode)
		readyPod(ns, "web-2", web, "10.0.0.2") // not on the lost node
		eventuallyStored("web", ns).Should(ConsistOf("web-2"))
		Eventually(func() string {
			for _, e := range getRegistry(reg).Status.Endpoints {
				if e.Pod == "web-1" {
					return e.Reason
				}
			}
			return ""
		}).WithTimeout(timeout).Should(Equal(v1beta1.ReasonNodeLeaseExpired))

		renewLease(lease, time.Now())
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"))
	})

	It("drops a pod when its node stops renewing, with no other event", func() {
		readyPod(ns, "web-1", web, "10.0.0.1", onNode)
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		putLease(node, time.Now(), 3) // renewed now, then never again
		Eventually(func() []string { return storedPods("web", ns) }).WithTimeout(timeout).Should(BeEmpty(),
			"the pod stayed registered after its node's 3 s Lease lapsed")
	})
})

func putLease(node string, renew time.Time, seconds int32) *coordinationv1.Lease {
	GinkgoHelper()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: &metav1.MicroTime{Time: renew},
		},
	}
	Expect(k8sClient.Create(context.Background(), lease)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), lease) })
	return lease
}

func renewLease(lease *coordinationv1.Lease, at time.Time) {
	GinkgoHelper()
	patch := client.MergeFrom(lease.DeepCopy())
	lease.Spec.RenewTime = &metav1.MicroTime{Time: at}
	Expect(k8sClient.Patch(context.Background(), lease, patch)).To(Succeed())
}
