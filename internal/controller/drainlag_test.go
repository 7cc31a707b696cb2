package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 13, hole 4: the drain advice and the deregistration lag are measured only from a
// trigger known precisely, per registry: a deregistration not caused by a readiness change
// or a deletion (here a node Lease lapse) must not poison DrainSufficient, and one registry's
// deregistrations must not change another registry's advice.
var _ = Describe("Drain advice", func() {
	It("is not poisoned by a node Lease lapse, nor by another registry", func() {
		ctx := context.Background()
		ns := newNamespace()
		leaseNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}
		if err := k8sClient.Create(ctx, leaseNS); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
		Expect(k8sClient.Create(ctx, n)).To(Succeed())

		tight := func(r *v1beta1.ServiceRegistry) {
			r.Spec.Drain = &v1beta1.DrainSpec{Seconds: ptr.To[int32](5), CallerCacheSeconds: ptr.To[int32](5)}
		}
		lost := newRegistry(ns, "lost", "lost")
		updateRegistry(lost, tight)
		quiet := newRegistry(ns, "quiet", "quiet")
		updateRegistry(quiet, tight)

		// the pod became ready well before its node is lost: a lag measured from its
		// ContainersReady transition would be seconds long.
		readyPod(ns, "lost-1", map[string]string{"app": "lost"}, "10.0.0.1", func(p *corev1.Pod) { p.Spec.NodeName = n.Name })
		readyPod(ns, "quiet-1", map[string]string{"app": "quiet"}, "10.0.0.2")
		eventuallyStored("lost", ns).Should(ConsistOf("lost-1"))
		eventuallyStored("quiet", ns).Should(ConsistOf("quiet-1"))
		time.Sleep(2 * time.Second) // the pod's age is what a wrong trigger would measure
		putLease(n.Name, time.Now(), 2)
		Eventually(func() []string { return storedPods("lost", ns) }).WithTimeout(timeout).Should(BeEmpty())

		for _, reg := range []*v1beta1.ServiceRegistry{lost, quiet} {
			Eventually(func(g Gomega) {
				st := getRegistry(reg).Status
				g.Expect(st.Drain).NotTo(BeNil())
				g.Expect(st.ObservedGeneration).To(Equal(getRegistry(reg).Generation))
			}).WithTimeout(timeout).Should(Succeed())
			Consistently(condition(reg, v1beta1.ConditionDrainSufficient)).WithTimeout(2*time.Second).
				Should(haveCondition(metav1.ConditionTrue, "DrainCoversCallers"), "registry %s", reg.Name)
			Expect(getRegistry(reg).Status.Drain.DeregistrationLagMillis).To(BeZero(), "registry %s", reg.Name)
		}
	})
})
