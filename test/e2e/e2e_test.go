//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/test/e2e/install"
)

const (
	demoPort = install.DemoPort
	replicas = 3
	loadRPS  = 50
)

var registrarAnnotations = install.RegistrarAnnotations

func demoDeployment(ns, name string, annotations map[string]string, extraArgs []string) *appsv1.Deployment {
	return install.DemoDeployment(ns, name, replicas, annotations, extraArgs)
}

var _ = Describe("Annotated Deployment on a real kubelet", Ordered, func() {
	It("injects the gate and preStop, warms pods up before Ready, and registers them before the gate flips", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		gates := watchGatesAgainstStore(ctx, ns, "demo")
		d := demoDeployment(ns, "demo", registrarAnnotations("demo"), nil)
		Expect(k8s.Create(ctx, d)).To(Succeed())
		waitRolledOut(ctx, d)
		gates.verifyGates(ctx, d)
		Expect(gates.flipped()).To(Equal(replicas), "the pod watch did not see every gate turn True")

		Eventually(func(g Gomega) {
			reg := &v1beta1.ServiceRegistry{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, reg)).To(Succeed())
			g.Expect(reg.Status.Registered).To(Equal(int32(replicas)))
			g.Expect(reg.Status.Desired).To(Equal(int32(replicas)))
			g.Expect(meta.IsStatusConditionTrue(reg.Status.Conditions, v1beta1.ConditionReady)).To(BeTrue())
		}).Should(Succeed(), "the ServiceRegistry's status does not show the registered pods")
		pods := podsOf(ctx, d)
		Expect(pods).To(HaveLen(replicas))
		for _, p := range pods {
			Expect(p.Spec.ReadinessGates).To(ContainElement(corev1.PodReadinessGate{ConditionType: v1beta1.ReadinessGate}))
			Expect(p.Spec.Containers[0].Lifecycle.PreStop.Sleep.Seconds).To(Equal(int64(5)))
			st := demoStats(p.Status.PodIP)
			Expect(st.WarmupHits).To(BeNumerically(">=", 5), "pod %s Ready after %d warm-up requests", p.Name, st.WarmupHits)
			resp, err := storeClient.Get(ctx, fmt.Sprintf("/registrar/services/demo/%s/%s", ns, p.Name))
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Kvs).To(HaveLen(1), "pod %s Ready but not in the store", p.Name)
		}
	})
})

func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	}).Should(Succeed(), "no default ServiceAccount in %s", ns.Name)
	DeferCleanup(func() {
		_ = k8s.Delete(context.Background(), ns)
		// Every spec's registry claims the service name "demo": until the namespace controller
		// has marked this namespace's registries deleted, they own the name and the next spec's
		// registry would wait for the hand-over (docs/security.md, Tenancy).
		Eventually(func(g Gomega) {
			var regs v1beta1.ServiceRegistryList
			g.Expect(k8s.List(context.Background(), &regs, client.InNamespace(ns.Name))).To(Succeed())
			for _, r := range regs.Items {
				g.Expect(r.DeletionTimestamp).NotTo(BeNil(), "registry %s/%s not yet being deleted", ns.Name, r.Name)
			}
		}).WithTimeout(time.Minute).Should(Succeed())
	})
	return ns.Name
}

// waitRolledOut waits until every replica runs the latest template, is available, and no
// old pod is left (terminating pods included).
func waitRolledOut(ctx context.Context, d *appsv1.Deployment) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		cur := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), cur)).To(Succeed())
		g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		g.Expect(cur.Status.UpdatedReplicas).To(Equal(int32(replicas)))
		g.Expect(cur.Status.AvailableReplicas).To(Equal(int32(replicas)))
		g.Expect(cur.Status.Replicas).To(Equal(int32(replicas)))
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(replicas))
	}).WithTimeout(3*time.Minute).Should(Succeed(), "deployment %s did not roll out", d.Name)
}

func restartRollout(ctx context.Context, d *appsv1.Deployment) {
	GinkgoHelper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"e2e.registrar.dev/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	Expect(k8s.Patch(ctx, d, client.RawPatch("application/strategic-merge-patch+json", []byte(patch)))).To(Succeed())
}

func podsOf(ctx context.Context, d *appsv1.Deployment) []corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels))).To(Succeed())
	return pods.Items
}

type stats struct {
	WarmupHits int `json:"warmup_hits"`
	Requests   int `json:"requests"`
}

func demoStats(ip string) stats {
	GinkgoHelper()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://%s:%d/stats", ip, demoPort))
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var st stats
	Expect(json.NewDecoder(resp.Body).Decode(&st)).To(Succeed())
	return st
}

// gateWatch is what watchGatesAgainstStore saw: the pods whose registrar.dev/ready gate it
// saw turn True (and whether the store held their endpoint at that moment), the violations,
// and every time its watch had to be resumed.
type gateWatch struct {
	mu         sync.Mutex
	checked    map[string]bool
	violations []string
	restarts   []string
}

// watchGatesAgainstStore watches the namespace's pods and, the moment a pod's
// registrar.dev/ready condition turns True, reads the store: an absent endpoint is a
// violation of the store-acknowledged gate.
//
// The watch starts at the resourceVersion of a List and is resumed from the last version it
// delivered whenever the API server ends it (client-go's RetryWatcher), so no transition is
// lost to a closed watch. When it cannot be resumed (410 Gone: the version was compacted
// away), it lists again and checks the store for every pod whose gate is True by then and
// that it had not seen turn True (recorded as a late check), then watches from the new
// list. Judge the final state with verifyGates, not the count alone.
func watchGatesAgainstStore(ctx context.Context, ns, service string) *gateWatch {
	GinkgoHelper()
	gw := &gateWatch{checked: map[string]bool{}}
	cs, err := kubernetes.NewForConfig(restCfg)
	Expect(err).NotTo(HaveOccurred())
	pods := cs.CoreV1().Pods(ns)
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return pods.Watch(ctx, opts)
	}}
	ctx, cancel := context.WithCancel(ctx)
	check := func(pod *corev1.Pod, how string) {
		if !gateTrue(pod) {
			return
		}
		gw.mu.Lock()
		seen := gw.checked[pod.Name]
		gw.checked[pod.Name] = true
		gw.mu.Unlock()
		if seen {
			return
		}
		if how != "" {
			gw.note(fmt.Sprintf("gate of %s checked %s", pod.Name, how))
		}
		gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
		defer gcancel()
		resp, err := storeClient.Get(gctx, fmt.Sprintf("/registrar/services/%s/%s/%s", service, ns, pod.Name))
		if err != nil || len(resp.Kvs) == 0 {
			gw.mu.Lock()
			gw.violations = append(gw.violations, fmt.Sprintf("gate of %s True while the store has no endpoint (err %v)", pod.Name, err))
			gw.mu.Unlock()
		}
	}
	// list checks the pods already there and returns the version to watch from.
	list := func(how string) (string, error) {
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for i := range l.Items {
			check(&l.Items[i], how)
		}
		return l.ResourceVersion, nil
	}
	rv, err := list("")
	Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	DeferCleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
			if err != nil {
				gw.note(fmt.Sprintf("start watch at %s: %v", rv, err))
				return
			}
			for ev := range w.ResultChan() {
				switch ev.Type {
				case watch.Error:
					gw.note(fmt.Sprintf("watch error %v", apierrors.FromObject(ev.Object)))
					continue
				case watch.Bookmark:
					continue
				}
				if pod, ok := ev.Object.(*corev1.Pod); ok {
					check(pod, "")
				}
			}
			w.Stop()
			if ctx.Err() != nil {
				return
			}
			for ctx.Err() == nil { // the watch could not be resumed: list again
				if rv, err = list("late, after the watch was lost and the pods were listed again"); err == nil {
					break
				}
				gw.note(fmt.Sprintf("list pods: %v", err))
				time.Sleep(time.Second) // retry pacing against an unavailable API server
			}
		}
	}()
	return gw
}

func (gw *gateWatch) note(s string) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	gw.restarts = append(gw.restarts, time.Now().Format("15:04:05.000")+": "+s)
}

func (gw *gateWatch) flipped() int {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return len(gw.checked)
}

// verifyGates judges the final state of the Deployment's pods against what the watch saw:
// every pod carries the gate in its spec (the webhook injected it), its gate is True, the
// watch saw it turn True, and the store was checked at that moment.
func (gw *gateWatch) verifyGates(ctx context.Context, d *appsv1.Deployment) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		pods := podsOf(ctx, d)
		g.Expect(pods).To(HaveLen(replicas))
		gw.mu.Lock()
		defer gw.mu.Unlock()
		var problems []string
		for _, p := range pods {
			switch {
			case !slices.Contains(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: v1beta1.ReadinessGate}):
				problems = append(problems, fmt.Sprintf("pod %s (created %s) has no %s readiness gate (admitted without the webhook's injection; annotations %v; %s)",
					p.Name, p.CreationTimestamp.Format(time.RFC3339), v1beta1.ReadinessGate, p.Annotations, managerState(ctx)))
			case !gateTrue(&p):
				problems = append(problems, fmt.Sprintf("pod %s: gate not True", p.Name))
			case !gw.checked[p.Name]:
				problems = append(problems, fmt.Sprintf("pod %s: gate True but the watch never delivered the transition (watch errors: %v)", p.Name, gw.restarts))
			}
		}
		g.Expect(problems).To(BeEmpty())
	}).WithTimeout(30*time.Second).Should(Succeed(), "the pods' gates do not match what the pod watch saw")
	gw.mu.Lock()
	defer gw.mu.Unlock()
	Expect(gw.violations).To(BeEmpty())
	if len(gw.restarts) > 0 {
		AddReportEntry("pod watch interruptions", gw.restarts)
		fmt.Fprintf(GinkgoWriter, "pod watch interruptions: %v\n", gw.restarts)
	}
}

// managerState describes registrar's manager pods (restarts, start times), for messages.
func managerState(ctx context.Context) string {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(install.Namespace)); err != nil {
		return fmt.Sprintf("manager pods unknown: %v", err)
	}
	var out []string
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		started := ""
		if p.Status.StartTime != nil {
			started = p.Status.StartTime.Format(time.RFC3339)
		}
		out = append(out, fmt.Sprintf("%s started %s restarts %d", p.Name, started, restarts))
	}
	return "manager pods: " + strings.Join(out, ", ")
}

func gateTrue(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1beta1.ReadinessGate && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
