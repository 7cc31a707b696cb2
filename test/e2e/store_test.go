//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/test/e2e/install"
)

// Issue 37: the store that comes with the install survives losing a member, and an upgrade
// of registrar itself loses nothing. Both run callers against the demo app the whole time
// (round robin over what registrar's keys list, 50 requests/s, as the comparison's callers).

var _ = Describe("The bundled store under load", Label("bundled-store"), func() {
	It("keeps every endpoint and every request when the leading etcd member's pod is deleted", func() {
		if storeMode != "bundled" {
			Skip("needs the bundled store: E2E_STORE=bundled")
		}
		ctx := context.Background()
		sv := startServing(ctx)

		leader, err := install.LeaderPod(ctx, storeClient)
		Expect(err).NotTo(HaveOccurred())
		victim := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: leader}, victim)).To(Succeed())
		oldUID := victim.UID
		Expect(k8s.Delete(ctx, victim)).To(Succeed())
		deletedAt := time.Now()

		// While the member is gone, registrar must still get a change into the store: a new
		// pod's gate is released only after the store acknowledged its endpoint.
		scale(ctx, sv.d, replicas+1)
		Eventually(sv.targets.list).WithTimeout(2*time.Minute).Should(HaveLen(replicas+1),
			"the new pod was not registered while a member was gone (%s)", install.MembersState(ctx, k8s))
		Eventually(func() int { return readyPods(ctx, sv.d) }).Should(Equal(replicas + 1))
		registered := time.Since(deletedAt)

		// The member comes back: a new pod of the same name on the same volume rejoins.
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: leader}, p)).To(Succeed())
			g.Expect(p.UID).NotTo(Equal(oldUID))
		}).WithTimeout(time.Minute).Should(Succeed())
		Expect(install.WaitStore(ctx, k8s, 3*time.Minute)).To(Succeed())
		back := time.Since(deletedAt)
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ml, err := storeClient.MemberList(mctx)
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, m := range ml.Members {
			names = append(names, m.Name)
		}
		Expect(names).To(ConsistOf(install.EtcdName+"-0", install.EtcdName+"-1", install.EtcdName+"-2"), "members after the restart")

		sv.finish(ctx, replicas+1)
		AddReportEntry("etcd member loss", fmt.Sprintf("deleted %s (the leader); a new pod registered %s later; the member ready again after %s; %s",
			leader, registered.Round(time.Millisecond), back.Round(time.Millisecond), sv.load))
	})
})

var _ = Describe("Upgrading registrar under load", Label("upgrade"), func() {
	It("deregisters no live pod, fails no request and releases the gates of pods admitted during the upgrade", func() {
		ctx := context.Background()
		sv := startServing(ctx)

		// The new version: the same binary under a new tag (the cluster imports images, it
		// pulls none), and for Helm a new chart version too.
		tag := fmt.Sprintf("e2e-upgrade-%d", time.Now().Unix())
		image := "registrar.dev/registrar:" + tag
		out, err := exec.Command("ctr", "--address", containerdSock, "-n", "k8s.io", "images", "tag", "--force",
			"registrar.dev/registrar:local", image).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "ctr images tag: %s", out)
		start := time.Now()
		if installMethod == "helm" {
			Expect(install.HelmUpgrade(ctx, restCfg, helmCLI, installStoreEndpoint, tag, "0.1.1-e2e."+tag)).To(Succeed())
		} else {
			Expect(install.Apply(ctx, k8s, restCfg, filepath.Clean(installYAML), installStoreEndpoint, image)).To(Succeed())
		}
		// Pods admitted while the manager rolls over: whichever manager (or none) admits
		// them, they must end up registered, and a gate injected must be released.
		scale(ctx, sv.d, replicas+2)
		Expect(install.WaitManager(ctx, k8s, image)).To(Succeed(), "the manager did not roll out %s (%s)", image, managerState(ctx))
		rolled := time.Since(start)
		Eventually(func() int { return readyPods(ctx, sv.d) }).WithTimeout(3 * time.Minute).Should(Equal(replicas + 2))
		var gated, ungated []string
		for _, p := range podsOf(ctx, sv.d) {
			if slices.Contains(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: v1beta1.ReadinessGate}) {
				Expect(gateTrue(&p)).To(BeTrue(), "pod %s: gate not released", p.Name)
				gated = append(gated, p.Name)
			} else {
				ungated = append(ungated, p.Name)
			}
		}
		sv.finish(ctx, replicas+2)
		AddReportEntry("registrar upgrade", fmt.Sprintf("%s: rolled to %s in %s; pods with a released gate %v, admitted without one %v; %s",
			installMethod, image, rolled.Round(time.Millisecond), gated, ungated, sv.load))
		fmt.Fprintf(GinkgoWriter, "upgrade: pods admitted with a gate %v, without %v\n", gated, ungated)
	})
})

// serving is the demo service under load for one spec: its Deployment, the callers' view of
// registrar's keys, the load, and the deletions of its keys.
type serving struct {
	d       *appsv1.Deployment
	prefix  string
	targets *targetSet
	load    *load
	stop    func()
	deletes *atomic.Int64
}

// startServing runs the demo service (3 replicas) in a namespace of its own, waits until
// registrar lists every replica, and starts the callers and a count of the deletions of the
// service's keys.
func startServing(ctx context.Context) *serving {
	GinkgoHelper()
	ns := newNamespace(ctx)
	sv := &serving{d: demoDeployment(ns, "demo", registrarAnnotations("demo"), nil), prefix: fmt.Sprintf("/registrar/services/demo/%s/", ns)}
	Expect(k8s.Create(ctx, sv.d)).To(Succeed())
	waitRolledOut(ctx, sv.d)
	sv.targets = watchStore(ctx, sv.prefix, registrarAddress)
	Eventually(sv.targets.list).Should(HaveLen(replicas))
	sv.deletes = countDeletes(ctx, sv.prefix)
	sv.load, sv.stop = startLoad(ctx, sv.targets, loadRPS)
	var once sync.Once
	stop := sv.stop
	sv.stop = func() { once.Do(stop) }
	DeferCleanup(sv.stop)
	Consistently(sv.load.failed.Load).WithTimeout(2*time.Second).Should(BeZero(), "requests failed before the fault: %s", sv.load)
	return sv
}

// finish keeps the load on a little longer, stops it, and checks the spec's outcome: no
// failed request, no key of the service deleted (no pod left), and want keys, one per pod.
func (sv *serving) finish(ctx context.Context, want int) {
	GinkgoHelper()
	Consistently(sv.load.failed.Load).WithTimeout(3*time.Second).Should(BeZero(), "requests failed: %s", sv.load)
	sv.stop()
	Expect(sv.load.failed.Load()).To(BeZero(), "requests failed: %s", sv.load)
	Expect(sv.load.ok.Load()).To(BeNumerically(">", 100), "too few requests to judge: %s", sv.load)
	Expect(sv.deletes.Load()).To(BeZero(), "keys of live pods were deleted")
	Expect(countKeys(ctx, sv.prefix)).To(Equal(want))
	for _, p := range podsOf(ctx, sv.d) {
		resp, err := storeClient.Get(ctx, sv.prefix+p.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Kvs).To(HaveLen(1), "pod %s is not in the store", p.Name)
	}
}

// countDeletes counts the deletions of keys under prefix from now on.
func countDeletes(ctx context.Context, prefix string) *atomic.Int64 {
	GinkgoHelper()
	n := &atomic.Int64{}
	resp, err := storeClient.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	Expect(err).NotTo(HaveOccurred())
	wctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	wch := storeClient.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	go func() {
		for r := range wch {
			for _, ev := range r.Events {
				if ev.Type == clientv3.EventTypeDelete {
					n.Add(1)
				}
			}
		}
	}()
	return n
}
