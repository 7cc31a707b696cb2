package controller_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 19, item 5: node Lease lapses that would remove most of a registry's endpoints at
// once are held (the operator being cut off is likelier than every node dying); a single
// node's lapse is not; removals for the pods' own status never are.
var _ = Describe("Node Lease guard", func() {
	const nodes = 4
	var (
		ctx   context.Context
		ns    string
		reg   *v1beta1.ServiceRegistry
		names []string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace()
		reg = newRegistry(ns, "web", "web")
		if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		names = nil
		for range nodes {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "guard-node-"}}
			Expect(k8sClient.Create(ctx, n)).To(Succeed())
			DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), n) })
			names = append(names, n.Name)
		}
	})

	// renewing plays the kubelets of the given nodes: a 3 s Lease renewed every 500 ms until
	// the returned function stops it (each node's renewals stop at once).
	renewing := func(nodes ...string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		leases := make([]*coordinationv1.Lease, len(nodes))
		for i, n := range nodes {
			cur := &coordinationv1.Lease{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: n}, cur); err == nil {
				leases[i] = cur // renewed again below
				continue
			}
			leases[i] = putLease(n, time.Now(), 3)
		}
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for ctx.Err() == nil {
				for _, l := range leases {
					_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
						cur := &coordinationv1.Lease{}
						if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(l), cur); err != nil {
							return err
						}
						cur.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
						return k8sClient.Update(ctx, cur)
					})
				}
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		}()
		stopped := false
		stop = func() {
			if !stopped {
				stopped = true
				cancel()
				<-done
			}
		}
		DeferCleanup(stop)
		return stop
	}
	events := func(reason string) func() []string {
		return func() []string {
			var list eventsv1.EventList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "ServiceRegistry" && e.Reason == reason {
					notes = append(notes, e.Type+": "+e.Note)
				}
			}
			return notes
		}
	}
	endpointReason := func(pod string) func() string {
		return func() string {
			for _, e := range getRegistry(reg).Status.Endpoints {
				if e.Pod == pod {
					return e.Reason
				}
			}
			return ""
		}
	}

	It("holds the removals when every node's Lease lapses at once, still removes a pod that turns unready, and resumes when the Leases are renewed", func() {
		stop := renewing(names...)
		var pods []*corev1.Pod
		for i, n := range names {
			pods = append(pods, readyPod(ns, fmt.Sprintf("web-%d", i), web, fmt.Sprintf("10.0.0.%d", i+1), func(p *corev1.Pod) { p.Spec.NodeName = n }))
		}
		all := []string{"web-0", "web-1", "web-2", "web-3"}
		eventuallyStored("web", ns).Should(ConsistOf(all))

		stop() // every kubelet falls silent at once: the operator sees every Lease lapse
		// past the 3 s Leases and the reconcile at their lapse, with slack
		Consistently(func() []string { return storedPods("web", ns) }).WithTimeout(8*time.Second).Should(ConsistOf(all),
			"a mass lapse of node Leases deregistered the pods")
		// the registry's share is 100 %; so is the cluster's unless other tests' pods sit on nodes
		Eventually(condition(reg, v1beta1.ConditionDeregistrationHeld)).WithTimeout(timeout).
			Should(Or(haveCondition(metav1.ConditionTrue, v1beta1.ReasonNodeLeasesLapsedInRegistry),
				haveCondition(metav1.ConditionTrue, v1beta1.ReasonNodeLeasesLapsedInCluster)))
		Expect(storedPods("web", ns)).To(ConsistOf(all), "endpoints left the store during the hold")
		Eventually(endpointReason("web-2")).WithTimeout(timeout).Should(Equal(v1beta1.ReasonDeregistrationHeld))
		Eventually(func() []string {
			return append(events(v1beta1.ReasonNodeLeasesLapsedInRegistry)(), events(v1beta1.ReasonNodeLeasesLapsedInCluster)()...)
		}).WithTimeout(timeout).Should(ContainElement(And(HavePrefix("Warning: "), ContainSubstring("endpoint(s) kept in the store"))))

		// (the Event is the hold's first message: the Leases lapse a few ms apart, so it may
		// count fewer held endpoints than the condition's latest message)
		// a removal for the pod's own status is never held
		setPodStatus(pods[1], corev1.PodRunning, "10.0.0.2", false)
		eventuallyStored("web", ns).Should(ConsistOf("web-0", "web-2", "web-3"))
		Eventually(endpointReason("web-1")).WithTimeout(timeout).Should(Equal(v1beta1.ReasonContainersNotReady))

		renewing(names...) // the kubelets are back
		Eventually(condition(reg, v1beta1.ConditionDeregistrationHeld)).WithTimeout(timeout).Should(BeNil())
		Eventually(events(v1beta1.EventDeregistrationResumed)).WithTimeout(timeout).Should(ContainElement(HavePrefix("Normal: ")))
		Eventually(endpointReason("web-2")).WithTimeout(timeout).Should(Equal(v1beta1.ReasonContainersReady))
		Consistently(func() []string { return storedPods("web", ns) }).WithTimeout(2 * time.Second).Should(ConsistOf("web-0", "web-2", "web-3"))
	})

	It("deregisters the pods of one lost node within the node Lease bound, holding nothing", func() {
		stopLost := renewing(names[0])
		renewing(names[1:]...)
		for i, n := range names {
			readyPod(ns, fmt.Sprintf("web-%d", i), web, fmt.Sprintf("10.0.0.%d", i+1), func(p *corev1.Pod) { p.Spec.NodeName = n })
		}
		eventuallyStored("web", ns).Should(ConsistOf("web-0", "web-1", "web-2", "web-3"))

		stopLost()
		lost := time.Now()
		// the bound: the 3 s Lease, plus slack for a loaded machine
		Eventually(func() []string { return storedPods("web", ns) }).WithTimeout(15*time.Second).WithPolling(poll).
			Should(ConsistOf("web-1", "web-2", "web-3"), "the lost node's pod stayed registered")
		took := time.Since(lost)
		GinkgoWriter.Printf("one lost node's pod deregistered %s after its last renewal (Lease 3 s)\n", took)
		AddReportEntry("lost node deregistered after", took.String())
		Eventually(endpointReason("web-0")).WithTimeout(timeout).Should(Equal(v1beta1.ReasonNodeLeaseExpired))
		Expect(condition(reg, v1beta1.ConditionDeregistrationHeld)()).To(BeNil())
	})
})
