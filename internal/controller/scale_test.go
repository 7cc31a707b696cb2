package controller_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller/ctrlrt"
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
			var regs v1beta1.ServiceRegistryList
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

// Issue 16: CPU per transition is the number of reconciles per transition times the work of
// each. One pod's transition must cost its registry one reconcile: the echoes of the
// operator's own writes (its status write coming back as a registry update, its store write
// coming back through the store's watch) must not enqueue the registry again. Read from
// registrar_reconciles_total{trigger}.
var _ = Describe("Reconciles per pod transition", func() {
	// timeDriven are the triggers no event causes (a requeue after a delay, the periodic
	// re-read of the stores): the counter is the whole operator's, and registries other specs
	// left behind may be requeued in the window; the registry here has no reason to be.
	timeDriven := map[string]bool{ctrlrt.TriggerRequeue: true, ctrlrt.TriggerStoreResync: true}
	reconciles := func() map[string]float64 {
		GinkgoHelper()
		out := map[string]float64{}
		for series, v := range scrape() {
			if trigger, ok := strings.CutPrefix(series, `registrar_reconciles_total{trigger="`); ok {
				out[strings.TrimSuffix(trigger, `"}`)] = v
			}
		}
		return out
	}
	// settled waits until the counts stop moving (two equal reads a second apart).
	settled := func() map[string]float64 {
		GinkgoHelper()
		var last map[string]float64
		Eventually(func() bool {
			cur := reconciles()
			same := maps.Equal(cur, last)
			last = cur
			return same
		}).WithPolling(time.Second).WithTimeout(60 * time.Second).Should(BeTrue())
		return last
	}

	It("reconciles the registry once when one of its pods turns unready", func() {
		ns := newNamespace()
		reg := newRegistry(ns, "web", "web")
		pod := readyPod(ns, "web-0", map[string]string{"app": "web"}, "10.0.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-0"))
		Eventually(func() int32 { return getRegistry(reg).Status.Registered }).WithTimeout(timeout).Should(Equal(int32(1)))
		before := settled()

		setPodStatus(pod, corev1.PodRunning, "10.0.0.1", false)
		eventuallyStored("web", ns).Should(BeEmpty())
		Eventually(func() int32 { return getRegistry(reg).Status.Registered }).WithTimeout(timeout).Should(BeZero())
		after := settled()

		caused := map[string]float64{}
		for trigger, v := range after {
			if d := v - before[trigger]; d > 0 && !timeDriven[trigger] {
				caused[trigger] = d
			}
		}
		Expect(caused).To(Equal(map[string]float64{ctrlrt.TriggerPod: 1}),
			"reconciles caused by one pod transition, by trigger (before %v, after %v)", before, after)
		// And the transition is still fully handled: the status reports it.
		Expect(getRegistry(reg).Status.Endpoints).To(ConsistOf(
			HaveField("State", v1beta1.EndpointUnready)))
	})
})
