package controller_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 34, defect 1: a service of thousands of pods is planned, written and deleted like a
// service of three. A change of 128 or more endpoints of one service must land with the
// store as the operator builds it (its fence's comparison in every transaction).
var _ = Describe("A registry over 150 ready pods", func() {
	const replicas = 150
	const long = 60 * time.Second

	// readyGatedPods plays the Deployment and the kubelet: n pods with registrar's
	// readiness gate, running and with their containers ready.
	readyGatedPods := func(ns, app string, n int) []*corev1.Pod {
		GinkgoHelper()
		pods := make([]*corev1.Pod, 0, n)
		for i := range n {
			pod := newPod(ns, fmt.Sprintf("%s-%03d", app, i), map[string]string{"app": app}, func(p *corev1.Pod) {
				p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}}
			})
			setPodStatus(pod, corev1.PodRunning, fmt.Sprintf("10.34.%d.%d", i/250, i%250+1), true)
			pods = append(pods, pod)
		}
		return pods
	}
	// gatesTrue counts the namespace's pods whose registrar.dev/ready gate is True.
	gatesTrue := func(ns string) func() int {
		return func() int {
			var pods corev1.PodList
			Expect(k8sClient.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
			n := 0
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == v1beta1.ReadinessGate && c.Status == corev1.ConditionTrue {
						n++
					}
				}
			}
			return n
		}
	}
	registered := func(reg *v1beta1.ServiceRegistry) func() int32 {
		return func() int32 { return getRegistry(reg).Status.Registered }
	}

	It("registers them all at once when created over them; scaled to 0, removes them all; then deletes", func() {
		ns := newNamespace()
		readyGatedPods(ns, "web", replicas)
		// Created over a Deployment whose pods are all ready: its first reconcile plans 150
		// creates of one service.
		reg := newRegistry(ns, "web", "web")

		Eventually(func() []string { return storedPods("web", ns) }).WithTimeout(long).WithPolling(200 * time.Millisecond).
			Should(HaveLen(replicas))
		Eventually(gatesTrue(ns)).WithTimeout(long).WithPolling(200 * time.Millisecond).Should(Equal(replicas))
		Eventually(registered(reg)).WithTimeout(long).Should(Equal(int32(replicas)))

		By("scaled to 0: every pod deleted at once")
		Expect(k8sClient.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() []string { return storedPods("web", ns) }).WithTimeout(long).WithPolling(200 * time.Millisecond).
			Should(BeEmpty())
		Eventually(registered(reg)).WithTimeout(long).Should(BeZero())

		By("the registry's deletion completes (its finalizer released)")
		deleteRegistry(reg)
	})

	It("removes all of them when the registry is deleted, and releases its finalizer", func() {
		ns := newNamespace()
		reg := newRegistry(ns, "web", "web")
		readyGatedPods(ns, "web", replicas) // turn ready one by one, as in a rollout
		Eventually(func() []string { return storedPods("web", ns) }).WithTimeout(long).WithPolling(200 * time.Millisecond).
			Should(HaveLen(replicas))

		// The finalizer plans 150 deletes of one service.
		deleteRegistry(reg) // waits until it is gone: the finalizer ran
		Expect(storedPods("web", ns)).To(BeEmpty())
	})
})
