//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var containerdSock = envOr("E2E_CONTAINERD_SOCK", "../../bin/cluster/containerd/containerd.sock")

var _ = Describe("Pod lifecycle on a real kubelet", Ordered, func() {
	It("drops a crashed container's endpoint before the kubelet restarts it", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		d := demoDeployment(ns, "demo", registrarAnnotations("demo"), nil)
		Expect(k8s.Create(ctx, d)).To(Succeed())
		waitRolledOut(ctx, d)
		pod := podsOf(ctx, d)[0]
		key := fmt.Sprintf("/registrar/services/demo/%s/%s", ns, pod.Name)
		events := recordKeyEvents(ctx, key)

		id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
		killedAt := time.Now()
		out, err := exec.Command("ctr", "--address", containerdSock, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "ctr tasks kill: %s", out)

		Eventually(func() int32 { return restartsOf(ctx, &pod) }).Should(BeNumerically(">=", 1))
		Eventually(events.list).Should(ContainElements(HavePrefix("DELETE"), HavePrefix("PUT")), "the endpoint did not leave and come back")
		evs := events.list()
		Expect(evs[0]).To(HavePrefix("DELETE"), "the first store event after the crash was not the deregistration: %v", evs)
		deleted, registered := events.first("DELETE"), events.first("PUT")
		Expect(registered).To(BeTemporally(">", deleted))
		AddReportEntry("crash: kill to deregistered", deleted.Sub(killedAt).String())
		AddReportEntry("crash: kill to registered again (restart + warm-up)", registered.Sub(killedAt).String())
	})

	It("follows a scale 1→10→0", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		d := demoDeployment(ns, "demo", registrarAnnotations("demo"), nil)
		d.Spec.Replicas = ptr.To[int32](1)
		Expect(k8s.Create(ctx, d)).To(Succeed())
		prefix := fmt.Sprintf("/registrar/services/demo/%s/", ns)
		Eventually(func() int { return countKeys(ctx, prefix) }).Should(Equal(1))

		start := time.Now()
		scale(ctx, d, 10)
		Eventually(func() int { return countKeys(ctx, prefix) }).WithTimeout(3 * time.Minute).Should(Equal(10))
		AddReportEntry("scale 1→10: all registered (pods started, warmed up)", time.Since(start).String())
		Eventually(func() int { return readyPods(ctx, d) }).Should(Equal(10), "registered pods never became Ready (gate)")

		start = time.Now()
		scale(ctx, d, 0)
		Eventually(func() int { return countKeys(ctx, prefix) }).Should(BeZero())
		AddReportEntry("scale 10→0: all deregistered", time.Since(start).String())
	})
})

var kubeletPIDFile = envOr("E2E_KUBELET_PID", "../../bin/cluster/pids/kubelet")

var _ = Describe("A node that stops renewing its Lease", Ordered, func() {
	It("loses its endpoints after --node-lease-timeout and gets them back when the kubelet returns", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		d := demoDeployment(ns, "demo", registrarAnnotations("demo"), nil)
		Expect(k8s.Create(ctx, d)).To(Succeed())
		waitRolledOut(ctx, d)
		prefix := fmt.Sprintf("/registrar/services/demo/%s/", ns)
		Expect(countKeys(ctx, prefix)).To(Equal(replicas))

		pid, err := os.ReadFile(kubeletPIDFile)
		Expect(err).NotTo(HaveOccurred())
		kubelet := strings.TrimSpace(string(pid))
		stoppedAt := time.Now()
		Expect(exec.Command("kill", "-STOP", kubelet).Run()).To(Succeed())
		resumed := false
		resume := func() {
			if !resumed {
				Expect(exec.Command("kill", "-CONT", kubelet).Run()).To(Succeed())
				resumed = true
			}
		}
		DeferCleanup(resume)

		Eventually(func() int { return countKeys(ctx, prefix) }).WithTimeout(90 * time.Second).Should(BeZero())
		AddReportEntry("kubelet stopped to all endpoints deregistered", time.Since(stoppedAt).String())
		resume()
		resumedAt := time.Now()
		Eventually(func() int { return countKeys(ctx, prefix) }).WithTimeout(90 * time.Second).Should(Equal(replicas))
		AddReportEntry("kubelet resumed to all endpoints registered again", time.Since(resumedAt).String())
	})
})

// keyEvents records the store events of one key with the time the watcher saw them.
type keyEvents struct {
	ch   chan keyEvent
	seen []keyEvent
}

type keyEvent struct {
	typ string
	at  time.Time
}

func recordKeyEvents(ctx context.Context, key string) *keyEvents {
	GinkgoHelper()
	wch := storeClient.Watch(ctx, key, clientv3.WithCreatedNotify())
	Expect((<-wch).Created).To(BeTrue())
	k := &keyEvents{ch: make(chan keyEvent, 64)}
	go func() {
		for r := range wch {
			for _, ev := range r.Events {
				k.ch <- keyEvent{typ: ev.Type.String(), at: time.Now()}
			}
		}
	}()
	return k
}

// list returns the event types seen so far, in order (call from the test goroutine only).
func (k *keyEvents) list() []string {
	for {
		select {
		case e := <-k.ch:
			k.seen = append(k.seen, e)
			continue
		default:
		}
		break
	}
	types := make([]string, len(k.seen))
	for i, e := range k.seen {
		types[i] = e.typ
	}
	return types
}

// first is when the first event of typ was seen.
func (k *keyEvents) first(typ string) time.Time {
	k.list()
	for _, e := range k.seen {
		if e.typ == typ {
			return e.at
		}
	}
	return time.Time{}
}

func restartsOf(ctx context.Context, pod *corev1.Pod) int32 {
	cur := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil || len(cur.Status.ContainerStatuses) == 0 {
		return 0
	}
	return cur.Status.ContainerStatuses[0].RestartCount
}

func countKeys(ctx context.Context, prefix string) int {
	resp, err := storeClient.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return -1
	}
	return int(resp.Count)
}

func scale(ctx context.Context, d *appsv1.Deployment, n int32) {
	GinkgoHelper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	Expect(k8s.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

func readyPods(ctx context.Context, d *appsv1.Deployment) int {
	n := 0
	for _, p := range podsOf(ctx, d) {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				n++
			}
		}
	}
	return n
}
