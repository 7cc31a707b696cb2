package webhook_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/metrics"
	podwebhook "github.com/registrar-dev/registrar/internal/webhook"
)

// create submits pod and returns what the API server stored (after admission).
func create(pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	Expect(k8sClient.Create(context.Background(), pod)).To(Succeed())
	var stored corev1.Pod
	Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), &stored)).To(Succeed())
	return &stored
}

func gateCount(p *corev1.Pod) int {
	n := 0
	for _, g := range p.Spec.ReadinessGates {
		if g.ConditionType == v1beta1.ReadinessGate {
			n++
		}
	}
	return n
}

func preStopSleep(c corev1.Container) *int64 {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		return nil
	}
	return &c.Lifecycle.PreStop.Sleep.Seconds
}

// expectUntouched asserts that the stored pod shows no trace of injection.
func expectUntouched(p *corev1.Pod) {
	GinkgoHelper()
	Expect(p.Annotations).NotTo(HaveKey(v1beta1.AnnotationInjected))
	Expect(gateCount(p)).To(BeZero())
	for _, c := range p.Spec.Containers {
		Expect(c.Lifecycle).To(BeNil(), "container %s", c.Name)
	}
	Expect(p.Spec.TerminationGracePeriodSeconds).To(Equal(ptr.To[int64](30)), "API server default")
}

var _ = Describe("Pod webhook", func() {
	labels := map[string]string{"app": "orders"}

	It("injects the gate, the preStop sleep on the serving container, the raised grace period and the annotation", func() {
		ns := newNamespace()
		newRegistry(ns, "orders", labels, 20, true)

		p := newPod(ns, "orders-", labels, container("sidecar", 15000), container("app", 8080))
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](40)
		got := create(p)

		Expect(got.Annotations).To(HaveKeyWithValue(v1beta1.AnnotationInjected, "20"))
		Expect(gateCount(got)).To(Equal(1))
		Expect(preStopSleep(got.Spec.Containers[1])).To(Equal(ptr.To[int64](20)), "serving container app")
		Expect(got.Spec.Containers[0].Lifecycle).To(BeNil(), "sidecar does not serve port 8080")
		Expect(got.Spec.TerminationGracePeriodSeconds).To(Equal(ptr.To[int64](60)), "40s budget + 20s drain")
	})

	It("raises an unset grace period from the default 30s", func() {
		ns := newNamespace()
		newRegistry(ns, "orders", labels, 15, true)

		got := create(newPod(ns, "orders-", labels, container("app", 8080)))
		Expect(preStopSleep(got.Spec.Containers[0])).To(Equal(ptr.To[int64](15)))
		Expect(got.Spec.TerminationGracePeriodSeconds).To(Equal(ptr.To[int64](45)))
		Expect(got.Annotations).To(HaveKeyWithValue(v1beta1.AnnotationInjected, "15"))
	})

	It("leaves pods alone that no injecting registry selects", func() {
		ns := newNamespace()
		newRegistry(ns, "orders", labels, 15, true)
		newRegistry(ns, "quiet", map[string]string{"app": "quiet"}, 15, false)
		other := newNamespace()

		By("other labels")
		expectUntouched(create(newPod(ns, "billing-", map[string]string{"app": "billing"}, container("app", 8080))))
		By("a registry with injection disabled")
		expectUntouched(create(newPod(ns, "quiet-", map[string]string{"app": "quiet"}, container("app", 8080))))
		By("matching labels in another namespace")
		expectUntouched(create(newPod(other, "orders-", labels, container("app", 8080))))
	})

	It("returns an already injected pod unchanged", func() {
		ns := newNamespace()
		newRegistry(ns, "orders", labels, 15, true)
		first := create(newPod(ns, "orders-", labels, container("app", 8080)))
		Expect(first.Annotations).To(HaveKey(v1beta1.AnnotationInjected))

		// Submit the output of the first injection again, as a new pod.
		again := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, GenerateName: "orders-again-",
				Labels: first.Labels, Annotations: first.Annotations,
			},
			Spec: *first.Spec.DeepCopy(),
		}
		submitted := again.DeepCopy()
		second := create(again)

		Expect(second.Annotations).To(Equal(first.Annotations))
		Expect(equality.Semantic.DeepEqual(second.Spec, first.Spec)).To(BeTrue(),
			"spec changed on resubmission:\nfirst:  %+v\nsecond: %+v", first.Spec, second.Spec)
		Expect(equality.Semantic.DeepEqual(second.Spec, submitted.Spec)).To(BeTrue(), "the webhook modified an injected pod")
		Expect(gateCount(second)).To(Equal(1))
		Expect(second.Spec.TerminationGracePeriodSeconds).To(Equal(ptr.To[int64](45)), "not raised twice")
	})

	It("leaves an existing preStop alone and records an Event on the ServiceRegistry", func() {
		ns := newNamespace()
		reg := newRegistry(ns, "orders", labels, 15, true)

		app := container("app", 8080)
		app.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"/bin/graceful-stop"}},
		}}
		want := app.Lifecycle.DeepCopy()
		got := create(newPod(ns, "orders-", labels, app))

		Expect(got.Spec.Containers[0].Lifecycle).To(Equal(want), "existing preStop replaced")
		Expect(gateCount(got)).To(Equal(1), "the gate is still added")
		Expect(got.Annotations).To(HaveKeyWithValue(v1beta1.AnnotationInjected, "15"))
		Expect(got.Spec.TerminationGracePeriodSeconds).To(Equal(ptr.To[int64](30)), "no sleep added, so the budget is unchanged")

		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			var found []eventsv1.Event
			for _, e := range list.Items {
				if e.Regarding.Kind == "ServiceRegistry" && e.Regarding.Name == reg.Name && e.Reason == v1beta1.EventPreStopKept {
					found = append(found, e)
				}
			}
			g.Expect(found).To(HaveLen(1))
			e := found[0]
			g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
			g.Expect(e.Action).To(Equal(podwebhook.ActionInject))
			g.Expect(e.Regarding.UID).To(Equal(reg.UID))
			g.Expect(e.Note).To(ContainSubstring(`generateName "orders-"`))
			g.Expect(e.Note).To(ContainSubstring(`"app"`))
			g.Expect(e.Note).To(ContainSubstring("15s drain"))
		}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	})

	It("adds the gate but no preStop when drain is 0", func() {
		ns := newNamespace()
		newRegistry(ns, "orders", labels, 0, true)

		got := create(newPod(ns, "orders-", labels, container("app", 8080)))
		Expect(gateCount(got)).To(Equal(1))
		Expect(got.Spec.Containers[0].Lifecycle).To(BeNil())
		Expect(got.Spec.TerminationGracePeriodSeconds).To(Equal(ptr.To[int64](30)))
		Expect(got.Annotations).To(HaveKeyWithValue(v1beta1.AnnotationInjected, "0"))
	})
})

var _ = Describe("InjectCABundle", func() {
	It("writes the CA into every webhook of the configuration, once", func() {
		ctx := context.Background()
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "cabundle-test-"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name:                    "mpod.registrar.dev",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/never")},
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
				ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matches"}},
			}},
		}
		Expect(k8sClient.Create(ctx, cfg)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(context.Background(), cfg)).To(Succeed()) })

		ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
		Expect(podwebhook.InjectCABundle(ctx, k8sClient, k8sClient, cfg.Name, ca)).To(Succeed())
		got := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cfg), got)).To(Succeed())
		Expect(got.Webhooks[0].ClientConfig.CABundle).To(Equal(ca))

		rv := got.ResourceVersion
		Expect(podwebhook.InjectCABundle(ctx, k8sClient, k8sClient, cfg.Name, ca)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cfg), got)).To(Succeed())
		Expect(got.ResourceVersion).To(Equal(rv), "an unchanged caBundle was written again")
	})
})

var _ = Describe("Pod webhook before the operator created the Deployment's registry", func() {
	It("injects from an annotated Deployment's annotations", func() {
		ctx := context.Background()
		ns := newNamespace()
		labels := map[string]string{"app": "fresh"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh", Annotations: map[string]string{
				v1beta1.AnnotationService: "fresh", v1beta1.AnnotationPort: "8080", v1beta1.AnnotationDrainSeconds: "7",
			}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{container("app", 8080)}},
				},
			},
		}
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		Eventually(func() error { return mgrClient.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{}) }).
			WithTimeout(timeout).Should(Succeed(), "the webhook's cache never saw the Deployment")

		got := create(newPod(ns, "fresh-", labels, container("app", 8080)))
		Expect(gateCount(got)).To(Equal(1))
		Expect(preStopSleep(got.Spec.Containers[0])).To(Equal(ptr.To[int64](7)))
		Expect(got.Annotations).To(HaveKeyWithValue(v1beta1.AnnotationInjected, "7"))

		other := create(newPod(ns, "other-", map[string]string{"app": "other"}, container("app", 8080)))
		Expect(gateCount(other)).To(BeZero(), "a pod the Deployment does not select was injected")
	})
})

var _ = Describe("Pod webhook metrics", func() {
	It("counts injected and skipped pods", func() {
		labels := map[string]string{"app": "counted"}
		ns := newNamespace()
		newRegistry(ns, "counted", labels, 5, true)
		injected := testutil.ToFloat64(metrics.WebhookInjections.WithLabelValues("injected"))
		skipped := testutil.ToFloat64(metrics.WebhookInjections.WithLabelValues("skipped"))

		create(newPod(ns, "counted-", labels, container("app", 8080)))
		create(newPod(ns, "other-", map[string]string{"app": "nobody"}, container("app", 8080)))
		Expect(testutil.ToFloat64(metrics.WebhookInjections.WithLabelValues("injected"))).To(BeNumerically(">=", injected+1))
		Expect(testutil.ToFloat64(metrics.WebhookInjections.WithLabelValues("skipped"))).To(BeNumerically(">=", skipped+1))
	})
})

// The webhook configuration (config/webhook, as installed) keeps the API server from calling
// the webhook for kube-system and for namespaces and pods labelled registrar.dev/webhook=
// disabled: even a pod an injecting registry there selects is admitted unchanged.
var _ = Describe("Pod webhook scope", func() {
	labels := map[string]string{"app": "scoped"}

	It("does not mutate a kube-system pod an injecting registry selects", func() {
		newRegistry("kube-system", "scoped", labels, 15, true)
		DeferCleanup(func() {
			_ = k8sClient.Delete(context.Background(), &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "scoped"}})
		})
		ns := newNamespace()
		newRegistry(ns, "scoped", labels, 15, true)
		Expect(gateCount(create(newPod(ns, "scoped-", labels, container("app", 8080))))).To(Equal(1), "the control pod was not injected")
		p := create(newPod("kube-system", "scoped-", labels, container("app", 8080)))
		DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
		expectUntouched(p)
	})

	It("does not mutate pods in a namespace, or pods, labelled registrar.dev/webhook=disabled", func() {
		ns := newNamespace()
		newRegistry(ns, "scoped", labels, 15, true)
		optedOut := map[string]string{"app": "scoped", podwebhook.ScopeLabel: podwebhook.ScopeDisabled}
		expectUntouched(create(newPod(ns, "scoped-", optedOut, container("app", 8080))))

		nsObj := &corev1.Namespace{}
		Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		nsObj.Labels[podwebhook.ScopeLabel] = podwebhook.ScopeDisabled
		Expect(k8sClient.Update(context.Background(), nsObj)).To(Succeed())
		// The API server matches namespaceSelectors against its namespace cache, which sees
		// the new label a moment later.
		Eventually(func() int { return gateCount(create(newPod(ns, "scoped-", labels, container("app", 8080)))) }).
			WithTimeout(timeout).Should(BeZero(), "pods in a namespace labelled %s=%s are still mutated", podwebhook.ScopeLabel, podwebhook.ScopeDisabled)
		expectUntouched(create(newPod(ns, "scoped-", labels, container("app", 8080))))
	})
})

// The first pods of a new annotated Deployment reach the webhook moments after the Deployment
// was created, often before the webhook's cache has it (in a cluster the ReplicaSet
// controller creates them within milliseconds). Every one must be injected. The pods here
// are created as the ReplicaSet controller would (owned by ReplicaSet <deployment>-<hash>),
// right after the Deployment, without waiting for the webhook's cache.
var _ = Describe("Pod webhook racing a new annotated Deployment", func() {
	It("injects the pods created right after their Deployment", func() {
		ctx := context.Background()
		missed := 0
		for i := range 10 {
			ns := newNamespace()
			name := fmt.Sprintf("race-%d", i)
			labels := map[string]string{"app": name}
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
					v1beta1.AnnotationService: name, v1beta1.AnnotationPort: "8080"}},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{container("app", 8080)}},
					},
				},
			}
			Expect(k8sClient.Create(ctx, d)).To(Succeed())
			p := newPod(ns, name+"-5d4f8b7c9-", labels, container("app", 8080))
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-5d4f8b7c9", UID: "0d1e2f3a-0000-4000-8000-000000000001", Controller: ptr.To(true)}}
			if gateCount(create(p)) == 0 {
				missed++
			}
		}
		Expect(missed).To(BeZero(), "%d of 10 first pods of a new annotated Deployment were admitted without the gate", missed)
	})
})
