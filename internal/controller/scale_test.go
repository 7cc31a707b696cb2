package controller_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/selindex"
)

// Issue 16, item 1: the work of a pod event is proportional to the change, not to the
// namespace. A namespace holds many registries and pods unrelated to the one that changes;
// the operator's selector index counts the selectors it evaluates, the registries a pod event
// enqueues and the pods reconciles read, and the test asserts on those counts.
var _ = Describe("Work per pod event", func() {
	const others, otherPods = 30, 150

	// settled waits until the namespace's counts stop moving (two equal reads 500 ms apart),
	// i.e. the reconciles of the previous step are done, and returns them.
	settled := func(ns string) selindex.Stats {
		GinkgoHelper()
		var last selindex.Stats
		Eventually(func() bool {
			s := operator.r.IndexStats(ns)
			same := s == last
			last = s
			return same
		}).WithPolling(500 * time.Millisecond).WithTimeout(60 * time.Second).Should(BeTrue())
		return last
	}

	It("enqueues only the registries selecting the pod, before and after, and reads only their pods", func() {
		ctx := context.Background()
		ns := newNamespace()
		for i := range others {
			newRegistry(ns, fmt.Sprintf("other-%d", i), fmt.Sprintf("other-%d", i))
		}
		for i := range otherPods {
			newPod(ns, fmt.Sprintf("other-pod-%d", i), map[string]string{"app": fmt.Sprintf("other-%d", i%others), "pod-template-hash": "h"})
		}
		newRegistry(ns, "web", "web")
		pod := readyPod(ns, "web-0", map[string]string{"app": "web"}, "10.0.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-0"))
		// Every registry reconciled once (its status written after its pods were read), so
		// none of the first reconciles falls into the counts below.
		Eventually(func(g Gomega) {
			var regs v1alpha1.ServiceRegistryList
			g.Expect(k8sClient.List(ctx, &regs, client.InNamespace(ns))).To(Succeed())
			g.Expect(regs.Items).To(HaveLen(others + 1))
			for _, r := range regs.Items {
				g.Expect(r.Status.ObservedGeneration).To(Equal(r.Generation), "registry %s not reconciled yet", r.Name)
			}
		}).WithTimeout(60 * time.Second).Should(Succeed())
		before := settled(ns)
		Expect(before.PodEvents).To(BeNumerically(">=", otherPods+1), "the index saw the namespace's pods")

		By("a status change of one pod: one registry enqueued per event, no selector evaluated, one pod read per reconcile")
		setPodStatus(pod, corev1.PodRunning, "10.0.0.1", false)
		eventuallyStored("web", ns).Should(BeEmpty())
		after := settled(ns)
		events := after.PodEvents - before.PodEvents
		Expect(events).To(BeNumerically(">=", 1))
		Expect(after.Reached-before.Reached).To(Equal(events), "each event of web-0 enqueues exactly the registry web")
		Expect(after.SelectorsEvaluated-before.SelectorsEvaluated).To(BeZero(), "a status-only event evaluates no selector")
		// web's reconciles read web-0 only (a namespace-wide scan would read 151 pods each);
		// a few reconciles follow the change (the event, then web's own status write).
		Expect(after.PodsListed - before.PodsListed).To(BeNumerically("<=", 10))

		By("a label change: the old and the new registry enqueued, one selector evaluated")
		before = after
		Expect(k8sClient.Patch(ctx, &corev1.Pod{ObjectMeta: pod.ObjectMeta}, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"labels":{"app":"other-3"}}}`)))).To(Succeed())
		after = settled(ns)
		Expect(after.PodEvents - before.PodEvents).To(Equal(int64(1)))
		Expect(after.Reached-before.Reached).To(Equal(int64(2)), "web (which it left) and other-3 (which it joined)")
		Expect(after.SelectorsEvaluated-before.SelectorsEvaluated).To(Equal(int64(1)), "only other-3 is anchored under app=other-3")
		// other-3's reconciles read its 5 pods and web-0; web's read none.
		Expect(after.PodsListed - before.PodsListed).To(BeNumerically("<=", 3*(otherPods/others+1)))

		By("the registry it joined registers it once it is ready")
		setPodStatus(pod, corev1.PodRunning, "10.0.0.1", true)
		eventuallyStored("other-3", ns).Should(ConsistOf("web-0"))
		Expect(storedPods("web", ns)).To(BeEmpty())
	})
})
