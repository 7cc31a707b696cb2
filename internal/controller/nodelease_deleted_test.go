package controller_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

// Issue 34, defect 3: a node that is gone (its Node deleted, or its Lease deleted after it
// lapsed) never brings its pods back; only a new Lease renewing does.
var _ = Describe("Deleted nodes and node Leases", func() {
	var (
		ctx  context.Context
		ns   string
		reg  *v1beta1.ServiceRegistry
		node *corev1.Node
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace()
		reg = newRegistry(ns, "web", "web")
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
		Expect(k8sClient.Create(ctx, node)).To(Succeed())
		DeferCleanup(func() {
			_ = k8sClient.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}})
		})
		if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	})

	reasonOf := func(pod string) func() string {
		return func() string {
			for _, e := range getRegistry(reg).Status.Endpoints {
				if e.Pod == pod {
					return e.Reason
				}
			}
			return ""
		}
	}
	// touch makes the registry reconcile now (an annotation changes: not a status write).
	touch := func() {
		GinkgoHelper()
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := getRegistry(reg)
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations["test.registrar.dev/touched"] = time.Now().Format(time.RFC3339Nano)
			return k8sClient.Update(ctx, cur)
		})).To(Succeed())
	}
	// staysOut checks the store (read with the suite's separate client) over a window longer
	// than the lapsed-Lease re-check, after a reconcile was triggered.
	staysOut := func(msg string) {
		GinkgoHelper()
		touch()
		Consistently(func() []string { return storedPods("web", ns) }).
			WithTimeout(eligibility.LapsedLeaseRecheck+2*time.Second).WithPolling(100*time.Millisecond).
			Should(ConsistOf("web-2"), msg)
	}
	deleteNodeAndLease := func() {
		GinkgoHelper()
		Expect(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}})).To(Succeed())
		Expect(k8sClient.Delete(ctx, nodeLeaseOf(node.Name))).To(Succeed())
	}

	It("keeps the pods of a lapsed node out once its Node and Lease are deleted, until a new Lease renews", func() {
		putLease(node.Name, time.Now(), 3) // renewed now, then never again
		readyPod(ns, "web-1", web, "10.0.0.1", func(p *corev1.Pod) { p.Spec.NodeName = node.Name })
		readyPod(ns, "web-2", web, "10.0.0.2") // not on the lost node
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"))
		Eventually(reasonOf("web-1")).WithTimeout(timeout).Should(Equal(v1beta1.ReasonNodeLeaseExpired))
		eventuallyStored("web", ns).Should(ConsistOf("web-2"))

		deleteNodeAndLease()
		staysOut("a pod of a deleted node whose Lease had lapsed came back to the store")

		// The node comes back under the same name, with a new Lease renewing: eligible again.
		back := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
		Expect(k8sClient.Create(ctx, back)).To(Succeed())
		putLease(node.Name, time.Now(), 40)
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"), "the pod of a re-created node with a renewing Lease stayed out")
	})

	It("keeps the pods of a lapsed node out once its Lease alone is deleted", func() {
		putLease(node.Name, time.Now(), 3)
		readyPod(ns, "web-1", web, "10.0.0.1", func(p *corev1.Pod) { p.Spec.NodeName = node.Name })
		readyPod(ns, "web-2", web, "10.0.0.2")
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"))
		Eventually(reasonOf("web-1")).WithTimeout(timeout).Should(Equal(v1beta1.ReasonNodeLeaseExpired))
		eventuallyStored("web", ns).Should(ConsistOf("web-2"))

		Expect(k8sClient.Delete(ctx, nodeLeaseOf(node.Name))).To(Succeed())
		staysOut("a pod whose node Lease was deleted after it lapsed came back to the store")
	})

	It("takes the pods of a node deleted while its Lease was live out of the store", func() {
		putLease(node.Name, time.Now(), 40)
		readyPod(ns, "web-1", web, "10.0.0.1", func(p *corev1.Pod) { p.Spec.NodeName = node.Name })
		readyPod(ns, "web-2", web, "10.0.0.2")
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"))

		Expect(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}})).To(Succeed())
		eventuallyStored("web", ns).Should(ConsistOf("web-2"), "the pod of a deleted node stayed in the store")
		Eventually(reasonOf("web-1")).WithTimeout(timeout).Should(Equal(v1beta1.ReasonNodeLeaseExpired))
		staysOut("the pod of a deleted node came back to the store")
	})

	It("takes out the pods of several Nodes deleted at once: the node Lease guard holds no deletion", func() {
		var names []string
		for range 3 {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
			Expect(k8sClient.Create(ctx, n)).To(Succeed())
			names = append(names, n.Name)
		}
		names = append(names, node.Name)
		var kept *coordinationv1.Lease
		for i, n := range names {
			kept = putLease(n, time.Now(), 40) // live (capped at 20 s)
			readyPod(ns, fmt.Sprintf("web-%d", i), web, fmt.Sprintf("10.0.0.%d", i+1), func(p *corev1.Pod) { p.Spec.NodeName = n })
		}
		eventuallyStored("web", ns).Should(ConsistOf("web-0", "web-1", "web-2", "web-3"))
		renewLease(kept, time.Now()) // the node that stays is live for the rest of the test

		for _, n := range names[:3] { // 3 of 4 nodes, 75 % of the endpoints: a mass lapse would be held
			Expect(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
		}
		eventuallyStored("web", ns).Should(ConsistOf("web-3"), "the pods of deleted Nodes were held in the store")
		Consistently(func() []string { return storedPods("web", ns) }).WithTimeout(3 * time.Second).Should(ConsistOf("web-3"))
		Expect(condition(reg, v1beta1.ConditionDeregistrationHeld)()).To(BeNil())
	})

	// An operator that starts after a Node was deleted never sees the deletion: the pods still
	// bound to it are what the pod garbage collector calls orphaned. Found by the
	// production-shaped scenario (kill -9, Nodes deleted, restart: the dead pods came back).
	It("keeps out the pods of a Node that does not exist, and registers them once it does", func() {
		missing := "missing-" + ns
		readyPod(ns, "web-1", web, "10.0.0.1", func(p *corev1.Pod) { p.Spec.NodeName = missing })
		readyPod(ns, "web-2", web, "10.0.0.2")
		eventuallyStored("web", ns).Should(ConsistOf("web-2"))
		Eventually(reasonOf("web-1")).WithTimeout(timeout).Should(Equal(v1beta1.ReasonNodeLeaseExpired))
		touch()
		Consistently(func() []string { return storedPods("web", ns) }).WithTimeout(3 * time.Second).Should(ConsistOf("web-2"))

		Expect(k8sClient.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: missing}})).To(Succeed())
		DeferCleanup(func() {
			_ = k8sClient.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: missing}})
		})
		eventuallyStored("web", ns).Should(ConsistOf("web-1", "web-2"), "the Node exists now (no Lease yet): its pod is judged by its own status")
	})
})

// nodeLeaseOf names a node's Lease, for a delete.
func nodeLeaseOf(node string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node}}
}
