//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	podwebhook "github.com/registrar-dev/registrar/internal/webhook"
	"github.com/registrar-dev/registrar/test/e2e/install"
)

// The pod webhook's scope, as installed from dist/install.yaml: it is not called for pods in
// kube-system (nor registrar's own namespace, nor namespaces labelled
// registrar.dev/webhook=disabled), and what it costs where it is called. Pods are created
// with server-side dry-run: admission (webhook included) runs in full, nothing is stored.
var _ = Describe("Pod webhook scope", Ordered, func() {
	// injectingRegistry creates a ServiceRegistry with injection on that selects app=<name>.
	injectingRegistry := func(ctx context.Context, ns, name string) {
		GinkgoHelper()
		reg := &v1beta1.ServiceRegistry{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1beta1.ServiceRegistrySpec{
				Selector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Ports:     []v1beta1.ServicePort{{Name: "http", Port: demoPort}},
				Injection: &v1beta1.InjectionSpec{Enabled: ptr.To(true)},
			},
		}
		Expect(k8s.Create(ctx, reg)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), reg) })
	}
	dryRunPod := func(ctx context.Context, ns, app string) *corev1.Pod { return dryRun(ctx, k8s, ns, app) }
	injected := func(p *corev1.Pod) bool {
		return slices.Contains(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: v1beta1.ReadinessGate})
	}

	It("does not mutate pods in kube-system, and does mutate the same pod in an ordinary namespace", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		app := "scope-" + ns
		injectingRegistry(ctx, ns, app)
		injectingRegistry(ctx, "kube-system", app)
		// The control: the webhook's cache has the registry once a pod in ns is injected.
		Eventually(func() bool { return injected(dryRunPod(ctx, ns, app)) }).Should(BeTrue(),
			"a pod selected by an injecting ServiceRegistry in an ordinary namespace was not injected")
		p := dryRunPod(ctx, "kube-system", app)
		Expect(injected(p)).To(BeFalse(), "a kube-system pod got the readiness gate")
		Expect(p.Annotations).NotTo(HaveKey(v1beta1.AnnotationInjected), "a kube-system pod was mutated")
	})

	It("is not called in a namespace labelled registrar.dev/webhook=disabled", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		app := "scope-" + ns
		injectingRegistry(ctx, ns, app)
		Eventually(func() bool { return injected(dryRunPod(ctx, ns, app)) }).Should(BeTrue())
		optOut(ctx, ns)
		Eventually(func() bool { return injected(dryRunPod(ctx, ns, app)) }).Should(BeFalse(),
			"pods in a namespace labelled %s=%s are still mutated", podwebhook.ScopeLabel, podwebhook.ScopeDisabled)
	})

	// The added admission latency: dry-run pod creates in a namespace where the webhook injects
	// (a ServiceRegistry selects the pods) and in one where it is not called (opted out),
	// alternating, so that both see the same machine load.
	It("measures the admission latency the webhook adds", func() {
		ctx := context.Background()
		with, without := newNamespace(ctx), newNamespace(ctx)
		app := "latency"
		injectingRegistry(ctx, with, app)
		optOut(ctx, without)
		Eventually(func() bool { return injected(dryRunPod(ctx, with, app)) }).Should(BeTrue())
		Eventually(func() bool { return injected(dryRunPod(ctx, without, app)) }).Should(BeFalse())
		// A client without client-go's default rate limit (5 requests/s), which would
		// otherwise be all that is measured.
		cfg := rest.CopyConfig(restCfg)
		cfg.QPS, cfg.Burst = 1000, 1000
		fast, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		const n = 500
		var on, off []time.Duration
		for range n {
			t := time.Now()
			Expect(injected(dryRun(ctx, fast, with, app))).To(BeTrue())
			on = append(on, time.Since(t))
			t = time.Now()
			Expect(injected(dryRun(ctx, fast, without, app))).To(BeFalse())
			off = append(off, time.Since(t))
		}
		report := fmt.Sprintf("pod create (dry-run), %d each, %s: webhook injecting p50 %s p99 %s; webhook not called p50 %s p99 %s; added p50 %s p99 %s",
			n, time.Now().UTC().Format(time.RFC3339), pct(on, 50), pct(on, 99), pct(off, 50), pct(off, 99),
			pct(on, 50)-pct(off, 50), pct(on, 99)-pct(off, 99))
		AddReportEntry("webhook admission latency", report)
		fmt.Fprintln(GinkgoWriter, report)
	})
})

// dryRun creates a pod app-… in ns with server-side dry-run (admission runs in full, nothing
// is stored) and returns it as admitted.
func dryRun(ctx context.Context, c client.Client, ns, app string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: app + "-", Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: install.DemoImage,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: demoPort}}}}},
	}
	Expect(c.Create(ctx, p, client.DryRunAll)).To(Succeed())
	return p
}

// optOut labels ns registrar.dev/webhook=disabled and waits until the API server's view of
// the namespace has it (the webhook's namespaceSelector reads it from there).
func optOut(ctx context.Context, ns string) {
	GinkgoHelper()
	obj := &corev1.Namespace{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, obj)).To(Succeed())
	patch := client.MergeFrom(obj.DeepCopy())
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[podwebhook.ScopeLabel] = podwebhook.ScopeDisabled
	Expect(k8s.Patch(ctx, obj, patch)).To(Succeed())
}

// pct is the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p+99)/100 - 1
	return s[max(0, min(i, len(s)-1))].Round(100 * time.Microsecond)
}
