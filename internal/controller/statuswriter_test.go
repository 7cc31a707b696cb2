package controller_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller"
	"github.com/registrar-dev/registrar/internal/metrics"
)

// holdFinalizer keeps a test registry in deletion, where the operator leaves its status alone.
const holdFinalizer = "test.registrar.dev/hold"

// countingClient is the suite's real client, counting the status writes made through it.
type countingClient struct {
	client.Client
	mu     sync.Mutex
	writes map[types.NamespacedName]int
}

func (c *countingClient) Status() client.SubResourceWriter {
	return &countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

func (c *countingClient) count(name types.NamespacedName) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[name]
}

type countingStatus struct {
	client.SubResourceWriter
	c *countingClient
}

func (s *countingStatus) add(obj client.Object) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.writes[client.ObjectKeyFromObject(obj)]++
}

func (s *countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.add(obj)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s *countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.add(obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// heldRegistry creates a registry the operator no longer touches: it is being deleted, held
// by a test finalizer, after the operator wrote its first status and removed its finalizer.
func heldRegistry(ns, name string) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	reg := newRegistry(ns, name, name)
	Eventually(condition(reg, v1beta1.ConditionReady)).WithTimeout(timeout).ShouldNot(BeNil())
	updateRegistry(reg, func(r *v1beta1.ServiceRegistry) { controllerutil.AddFinalizer(r, holdFinalizer) })
	Expect(k8sClient.Delete(context.Background(), reg)).To(Succeed())
	Eventually(func() []string { return getRegistry(reg).Finalizers }).WithTimeout(timeout).
		Should(Equal([]string{holdFinalizer}))
	DeferCleanup(func() {
		updateRegistry(reg, func(r *v1beta1.ServiceRegistry) { controllerutil.RemoveFinalizer(r, holdFinalizer) })
	})
	return getRegistry(reg)
}

func statusWith(reg *v1beta1.ServiceRegistry, registered int32) v1beta1.ServiceRegistryStatus {
	st := *reg.Status.DeepCopy()
	st.Registered = registered
	return st
}

var _ = Describe("status writer", func() {
	var (
		ns     string
		cli    *countingClient
		writer *controller.StatusWriter
	)
	BeforeEach(func() {
		ns = newNamespace()
		cli = &countingClient{Client: k8sClient, writes: map[types.NamespacedName]int{}}
		writer = controller.NewStatusWriter(cli)
	})
	start := func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(writer.Start(ctx)).To(Succeed())
		}()
		DeferCleanup(func() {
			cancel()
			Eventually(done).WithTimeout(timeout).Should(BeClosed())
		})
	}

	It("writes only the newest of the statuses submitted before it got to the registry", func() {
		reg := heldRegistry(ns, "coalesced")
		for n := int32(1); n <= 20; n++ {
			writer.Submit(reg, statusWith(reg, 100+n))
		}
		start()
		Eventually(func() int32 { return getRegistry(reg).Status.Registered }).WithTimeout(timeout).Should(Equal(int32(120)))
		Expect(cli.count(client.ObjectKeyFromObject(reg))).To(Equal(1))
		Expect(getRegistry(reg).Status.Conditions).To(Equal(reg.Status.Conditions), "the rest of the status is kept")
	})

	It("does not write a status the object already holds", func() {
		reg := heldRegistry(ns, "unchanged")
		sentinel := heldRegistry(ns, "sentinel")
		start()
		writer.Submit(reg, statusWith(reg, reg.Status.Registered))
		writer.Submit(sentinel, statusWith(sentinel, 7)) // one worker: written after reg's turn
		Eventually(func() int32 { return getRegistry(sentinel).Status.Registered }).WithTimeout(timeout).Should(Equal(int32(7)))
		Expect(cli.count(client.ObjectKeyFromObject(reg))).To(BeZero())
		Expect(getRegistry(reg).ResourceVersion).To(Equal(reg.ResourceVersion))
	})

	It("drops the status of a registry that is gone", func() {
		start()
		gone := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone", UID: "0000"}}
		writer.Submit(gone, v1beta1.ServiceRegistryStatus{Registered: 3})
		Eventually(func() bool { return writer.Holds(client.ObjectKeyFromObject(gone)) }).WithTimeout(timeout).Should(BeFalse())
		err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(gone), &v1beta1.ServiceRegistry{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})

	It("writes a field that goes back to its zero value and drops a list that empties", func() {
		reg := heldRegistry(ns, "zeroed")
		start()
		st := statusWith(reg, 4)
		st.Draining = 2
		st.Endpoints = []v1beta1.EndpointStatus{{Pod: "p-1", State: v1beta1.EndpointDraining, Reason: v1beta1.ReasonPodTerminating}}
		writer.Submit(reg, st)
		Eventually(func() int32 { return getRegistry(reg).Status.Draining }).WithTimeout(timeout).Should(Equal(int32(2)))
		st = statusWith(reg, 0)
		writer.Submit(reg, st)
		Eventually(func() v1beta1.ServiceRegistryStatus { return getRegistry(reg).Status }).WithTimeout(timeout).
			Should(And(HaveField("Registered", int32(0)), HaveField("Draining", int32(0)), HaveField("Endpoints", BeEmpty())))
		Expect(getRegistry(reg).Status.Conditions).To(Equal(reg.Status.Conditions), "the rest of the status is kept")
	})

	It("paces a busy registry's writes and writes a change of its conditions at once", func() {
		clk := clocktesting.NewFakeClock(time.Now())
		writer = controller.NewPacedStatusWriter(cli, time.Minute, clk)
		reg := heldRegistry(ns, "paced")
		name := client.ObjectKeyFromObject(reg)
		start()
		registered := func() int32 { return getRegistry(reg).Status.Registered }

		By("an idle registry's change is written at once")
		writer.Submit(reg, statusWith(reg, 1))
		Eventually(registered).WithTimeout(timeout).Should(Equal(int32(1)))
		Expect(cli.count(name)).To(Equal(1))

		By("changes inside the interval wait for it, and only the newest is written")
		writer.Submit(reg, statusWith(reg, 2))
		writer.Submit(reg, statusWith(reg, 3))
		Consistently(registered).WithTimeout(time.Second).Should(Equal(int32(1)))
		Expect(cli.count(name)).To(Equal(1))
		clk.Step(time.Minute)
		Eventually(registered).WithTimeout(timeout).Should(Equal(int32(3)))
		Expect(cli.count(name)).To(Equal(2))

		By("a condition that changes its reason is written at once, inside the interval")
		urgent := statusWith(reg, 4)
		urgent.Conditions = append([]metav1.Condition(nil), urgent.Conditions...)
		urgent.Conditions[0].Reason = "SomethingElse"
		writer.Submit(reg, urgent)
		Eventually(registered).WithTimeout(timeout).Should(Equal(int32(4)))
		Expect(cli.count(name)).To(Equal(3))

		By("and the interval starts again from that write")
		written := getRegistry(reg)
		writer.Submit(written, statusWith(written, 5))
		Consistently(registered).WithTimeout(time.Second).Should(Equal(int32(4)))
		clk.Step(time.Minute)
		Eventually(registered).WithTimeout(timeout).Should(Equal(int32(5)))
		Expect(cli.count(name)).To(Equal(4))
	})

	It("shares a budget of non-urgent writes across registries and never holds an urgent one", func() {
		clk := clocktesting.NewFakeClock(time.Now())
		writer = controller.NewBudgetedStatusWriter(cli, 1, clk) // one write per second, burst 1
		first, waiting, urgentReg := heldRegistry(ns, "first"), heldRegistry(ns, "waiting"), heldRegistry(ns, "urgent")
		registered := func(reg *v1beta1.ServiceRegistry) func() int32 {
			return func() int32 { return getRegistry(reg).Status.Registered }
		}
		deferred := testutil.ToFloat64(metrics.StatusWritesDeferred)
		start()

		By("the budget's one token goes to the first registry")
		writer.Submit(first, statusWith(first, 11))
		Eventually(registered(first)).WithTimeout(timeout).Should(Equal(int32(11)))

		By("the next registry's change waits for the next token; an urgent change does not")
		writer.Submit(waiting, statusWith(waiting, 12))
		urgent := statusWith(urgentReg, 13)
		urgent.Conditions = append([]metav1.Condition(nil), urgent.Conditions...)
		urgent.Conditions[0].Reason = "SomethingElse"
		writer.Submit(urgentReg, urgent)
		Eventually(registered(urgentReg)).WithTimeout(timeout).Should(Equal(int32(13)))
		Consistently(registered(waiting)).WithTimeout(time.Second).ShouldNot(Equal(int32(12)))
		Expect(testutil.ToFloat64(metrics.StatusWritesDeferred)).To(BeNumerically(">", deferred))

		By("and is written once the budget has refilled, the newest status only")
		writer.Submit(waiting, statusWith(waiting, 14))
		clk.Step(time.Second)
		Eventually(registered(waiting)).WithTimeout(timeout).Should(Equal(int32(14)))
		Expect(cli.count(client.ObjectKeyFromObject(waiting))).To(Equal(1))
	})

	It("patches over the status the server holds, not the one it wrote last", func() {
		reg := heldRegistry(ns, "retried")
		start()
		writer.Submit(reg, statusWith(reg, 5))
		Eventually(func() int32 { return getRegistry(reg).Status.Registered }).WithTimeout(timeout).Should(Equal(int32(5)))
		// Someone else writes the status: the writer's last write is no longer the base.
		other := getRegistry(reg)
		other.Status.Registered = 9
		Expect(k8sClient.Status().Update(context.Background(), other)).To(Succeed())
		writer.Submit(reg, statusWith(reg, 6))
		Eventually(func() int32 { return getRegistry(reg).Status.Registered }).WithTimeout(timeout).Should(Equal(int32(6)))
	})
})
