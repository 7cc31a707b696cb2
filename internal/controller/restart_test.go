package controller_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// A SIGKILLed container that the kubelet restarts within a second or two: the API server may
// show the pod not ready only briefly, or not at all (the kubelet's status sync came after
// the restart and the first passing readiness probe), and reconciles are level-based. The
// restarted container is a new, cold process: registrar must notice the restart from the
// pod's container statuses and warm it up again before it counts as registered.
var _ = Describe("Container restart seen only after it is over", func() {
	It("takes a gated pod's endpoint out of the store and warms the restarted container up again", func() {
		ns, srv, pod := registeredGatedPod("127.0.0.41")
		Expect(srv.count()).To(Equal(2), "warm-up requests of the first start")

		deletes := countDeletes(key("web", ns, "web-1"))
		// Pod times have a resolution of one second: the restart comes in a later second than
		// the registration.
		registered := gateOf(pod).LastTransitionTime.Time
		Eventually(time.Now).WithTimeout(3 * time.Second).Should(BeTemporally(">=", registered.Add(time.Second)))
		// The kubelet's next status after the kill: restartCount 1, the new container running
		// since after the registration and ready again; ContainersReady never went False.
		restartContainer(pod, time.Now())

		Eventually(deletes.Load).WithTimeout(timeout).Should(BeNumerically(">=", 1),
			"the restarted container's endpoint never left the store")
		Eventually(srv.count).WithTimeout(timeout).Should(Equal(4), "the restarted container was not warmed up again")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Eventually(func() corev1.ConditionStatus { return gateOf(pod).Status }).WithTimeout(timeout).Should(Equal(corev1.ConditionTrue))
		Consistently(srv.count).WithTimeout(time.Second).Should(Equal(4), "warmed up more than once for one restart")
	})

	It("warms a gated pod up once more after a kill and restart the API server shows as a short not-ready window", func() {
		ns, srv, pod := registeredGatedPod("127.0.0.42")
		registered := gateOf(pod).LastTransitionTime.Time
		Eventually(time.Now).WithTimeout(3 * time.Second).Should(BeTemporally(">=", registered.Add(time.Second)))

		// The kubelet's two status writes, back to back: not ready (the container was killed),
		// then ready again with restartCount 1. The reconcile may see either or both.
		setPodStatus(pod, corev1.PodRunning, srv.ip, false)
		restartContainer(pod, time.Now())
		setPodStatus(pod, corev1.PodRunning, srv.ip, true)

		Eventually(srv.count).WithTimeout(timeout).Should(Equal(4), "the restarted container was not warmed up again")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Eventually(func() corev1.ConditionStatus { return gateOf(pod).Status }).WithTimeout(timeout).Should(Equal(corev1.ConditionTrue))
		Consistently(srv.count).WithTimeout(time.Second).Should(Equal(4), "warmed up more than once for one restart")
	})
})

// registeredGatedPod creates a gated pod served by a pod server on ip, selected by a registry
// that warms up with 2 requests, and waits until it is registered and its gate True.
func registeredGatedPod(ip string) (string, *podServer, *corev1.Pod) {
	GinkgoHelper()
	ns := newNamespace()
	srv := startPodServer(ip, http.StatusOK, 0)
	newGatedRegistry(ns, "web", v1beta1.WarmupSpec{Paths: []string{"/warm"}, Requests: 2, Concurrency: 1})
	pod := gatedPod(ns, "web-1", srv)
	setPodStatus(pod, corev1.PodRunning, srv.ip, true)
	Eventually(func() corev1.ConditionStatus { return gateOf(pod).Status }).WithTimeout(timeout).Should(Equal(corev1.ConditionTrue))
	eventuallyStored("web", ns).Should(ConsistOf("web-1"))
	return ns, srv, pod
}

// countDeletes counts the deletes of key a separate etcd watcher sees.
func countDeletes(key string) *atomic.Int64 {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	wch := storeClient.Watch(ctx, key, clientv3.WithCreatedNotify())
	Expect((<-wch).Created).To(BeTrue(), "store watch not established")
	var n atomic.Int64
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					n.Add(1)
				}
			}
		}
	}()
	return &n
}

// restartContainer plays the kubelet reporting, in one status write, that the pod's container
// was killed and has restarted at startedAt (restartCount+1), ready again: its pod conditions
// stay as they are.
func restartContainer(pod *corev1.Pod, startedAt time.Time) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		var restarts int32
		if len(cur.Status.ContainerStatuses) > 0 {
			restarts = cur.Status.ContainerStatuses[0].RestartCount
		}
		started := metav1.NewTime(startedAt)
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: cur.Spec.Containers[0].Name, Image: cur.Spec.Containers[0].Image, ImageID: "sha256:0",
			ContainerID: "containerd://restarted", Ready: true, Started: ptr.To(true), RestartCount: restarts + 1,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "Error", FinishedAt: metav1.NewTime(startedAt.Add(-time.Second)),
			}},
		}}
		if err := k8sClient.Status().Update(context.Background(), cur); err != nil {
			return err
		}
		*pod = *cur
		return nil
	})).To(Succeed())
}
