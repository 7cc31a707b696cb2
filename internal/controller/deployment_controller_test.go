package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/annotations"
)

var _ = Describe("Deployment", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace()
	})

	It("owns a ServiceRegistry generated from its annotations, which follows their changes", func() {
		dep := newAnnotatedDeployment(ns, "shop", map[string]string{
			v1beta1.AnnotationService:        "shop-svc",
			v1beta1.AnnotationPort:           "8080",
			v1beta1.AnnotationWarmupPaths:    "/healthz, /warm",
			v1beta1.AnnotationWarmupRequests: "40",
			v1beta1.AnnotationDrainSeconds:   "30",
		})

		reg := eventuallyRegistry(ns, "shop")
		Expect(reg.Spec.ServiceName).To(Equal("shop-svc"))
		Expect(reg.Spec.Selector).To(Equal(*dep.Spec.Selector))
		Expect(reg.Spec.Ports).To(Equal([]v1beta1.ServicePort{{Name: "http", Port: 8080}}))
		Expect(reg.Spec.Warmup).NotTo(BeNil())
		Expect(reg.Spec.Warmup.Paths).To(Equal([]string{"/healthz", "/warm"}))
		Expect(reg.Spec.Warmup.Requests).To(Equal(int32(40)))
		Expect(reg.Spec.Drain).To(Equal(&v1beta1.DrainSpec{Seconds: ptr.To[int32](30)}))
		Expect(reg.Labels).To(HaveKeyWithValue(v1beta1.LabelDeployment, "shop"))
		Expect(reg.Annotations).NotTo(HaveKey(v1beta1.AnnotationConfigError))
		owner := metav1.GetControllerOf(reg)
		Expect(owner).NotTo(BeNil())
		Expect(*owner).To(And(HaveField("APIVersion", "apps/v1"), HaveField("Kind", "Deployment"),
			HaveField("Name", "shop"), HaveField("UID", dep.UID)))
		Eventually(deploymentEvents(ns, "shop", v1beta1.EventRegistryCreated)).WithTimeout(timeout).WithPolling(poll).Should(HaveLen(1))

		annotateDeployment(dep, map[string]*string{
			v1beta1.AnnotationPort:           ptr.To("web"),
			v1beta1.AnnotationWarmupPaths:    ptr.To("/ready"),
			v1beta1.AnnotationWarmupRequests: nil,
			v1beta1.AnnotationDrainSeconds:   ptr.To("60"),
		})
		Eventually(func(g Gomega) {
			spec := getRegistry(reg).Spec
			g.Expect(spec.Ports).To(Equal([]v1beta1.ServicePort{{Name: "web", TargetPort: "web"}}))
			g.Expect(spec.Warmup).NotTo(BeNil())
			g.Expect(spec.Warmup.Paths).To(Equal([]string{"/ready"}))
			g.Expect(spec.Warmup.Requests).To(Equal(int32(10)), "the CRD default, once the annotation is gone")
			g.Expect(spec.Drain).To(Equal(&v1beta1.DrainSpec{Seconds: ptr.To[int32](60)}))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("putting back a spec edited by hand")
		updateRegistry(reg, func(r *v1beta1.ServiceRegistry) { r.Spec.Drain = &v1beta1.DrainSpec{Seconds: ptr.To[int32](5)} })
		Eventually(func() *v1beta1.DrainSpec { return getRegistry(reg).Spec.Drain }).
			WithTimeout(timeout).WithPolling(poll).Should(Equal(&v1beta1.DrainSpec{Seconds: ptr.To[int32](60)}))

		By("recreating a deleted registry")
		Expect(k8sClient.Delete(ctx, getRegistry(reg))).To(Succeed()) // its finalizer runs, then it comes back
		Eventually(func(g Gomega) {
			again := &v1beta1.ServiceRegistry{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(reg), again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(reg.UID))
			g.Expect(again.Spec.ServiceName).To(Equal("shop-svc"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("publishes its pods under the annotated service name, and withdraws them when the annotation is removed", func() {
		dep := newAnnotatedDeployment(ns, "cart", map[string]string{
			v1beta1.AnnotationService: "cart-api",
			v1beta1.AnnotationPort:    "8080",
		})
		reg := eventuallyRegistry(ns, "cart")
		readyPod(ns, "cart-1", dep.Spec.Selector.MatchLabels, "10.0.3.1")

		eventuallyStored("cart-api", ns).Should(ConsistOf("cart-1"))
		ep, _ := storedEndpoint(key("cart-api", ns, "cart-1"))
		Expect(ep.Ports).To(Equal(map[string]int32{"http": 8080}))
		Expect(ep.Owner).To(Equal(string(reg.UID)))

		annotateDeployment(dep, map[string]*string{v1beta1.AnnotationService: nil})
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(reg), &v1beta1.ServiceRegistry{}))
		}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the ServiceRegistry was not deleted")
		eventuallyStored("cart-api", ns).Should(BeEmpty())
		Eventually(deploymentEvents(ns, "cart", v1beta1.EventRegistryDeleted)).WithTimeout(timeout).WithPolling(poll).ShouldNot(BeEmpty())
	})

	It("reports a malformed annotation as a Warning and on the registry, applies the valid parts, and does not repeat itself", func() {
		dep := newAnnotatedDeployment(ns, "pay", map[string]string{
			v1beta1.AnnotationService:      "pay",
			v1beta1.AnnotationPort:         "8080",
			v1beta1.AnnotationDrainSeconds: "abc",
		})
		const problem = `registrar.dev/drain-seconds: "abc" is not an integer between 0 and 3600`

		reg := eventuallyRegistry(ns, "pay")
		Expect(reg.Annotations).To(HaveKeyWithValue(v1beta1.AnnotationConfigError, problem))
		Expect(reg.Spec.Ports).To(Equal([]v1beta1.ServicePort{{Name: "http", Port: 8080}}))
		Expect(reg.Spec.Drain).To(BeNil())

		warnings := deploymentEvents(ns, "pay", v1beta1.EventInvalidAnnotation)
		Eventually(warnings).WithTimeout(timeout).WithPolling(poll).Should(HaveLen(1))
		ev := warnings()[0]
		Expect(ev.Type).To(Equal(corev1.EventTypeWarning))
		Expect(ev.Regarding.Kind).To(Equal("Deployment"))
		Expect(ev.Regarding.Name).To(Equal("pay"))
		Expect(ev.Note).To(Equal(problem))

		By("not repeating the Warning while the problem stays the same")
		annotateDeployment(dep, map[string]*string{"example.com/touch": ptr.To("1")})
		annotateDeployment(dep, map[string]*string{"example.com/touch": ptr.To("2")})
		Consistently(func(g Gomega) {
			evs := warnings()
			g.Expect(evs).To(HaveLen(1))
			g.Expect(evs[0].Series).To(BeNil(), "the Warning was emitted again")
		}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		By("clearing the error once the annotation is fixed (0: no drain, not the default)")
		annotateDeployment(dep, map[string]*string{v1beta1.AnnotationDrainSeconds: ptr.To("0")})
		Eventually(func(g Gomega) {
			fixed := getRegistry(reg)
			g.Expect(fixed.Annotations).NotTo(HaveKey(v1beta1.AnnotationConfigError))
			g.Expect(fixed.Spec.Drain).To(Equal(&v1beta1.DrainSpec{Seconds: ptr.To[int32](0)}))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("creates no registry while the service name is invalid, and keeps the last valid spec when it becomes invalid", func() {
		dep := newAnnotatedDeployment(ns, "api", map[string]string{v1beta1.AnnotationService: "Bad_Name"})
		Eventually(deploymentEvents(ns, "api", v1beta1.EventInvalidAnnotation)).WithTimeout(timeout).WithPolling(poll).
			Should(ContainElement(HaveField("Note", ContainSubstring(`registrar.dev/service: "Bad_Name" is not a valid service name`))))
		Consistently(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, objKey(ns, "api"), &v1beta1.ServiceRegistry{}))
		}).WithTimeout(500 * time.Millisecond).Should(BeTrue())

		annotateDeployment(dep, map[string]*string{v1beta1.AnnotationService: ptr.To("api")})
		reg := eventuallyRegistry(ns, "api")
		Expect(reg.Spec.ServiceName).To(Equal("api"))

		annotateDeployment(dep, map[string]*string{v1beta1.AnnotationService: ptr.To("api.v2")})
		Eventually(func() map[string]string { return getRegistry(reg).Annotations }).WithTimeout(timeout).WithPolling(poll).
			Should(HaveKeyWithValue(v1beta1.AnnotationConfigError, ContainSubstring(`"api.v2" is not a valid service name`)))
		Expect(getRegistry(reg).Spec.ServiceName).To(Equal("api"))
	})

	It("never modifies or deletes a hand-written ServiceRegistry of the same name", func() {
		handWritten := newRegistry(ns, "web", "web")
		original := getRegistry(handWritten)
		dep := newAnnotatedDeployment(ns, "web", map[string]string{
			v1beta1.AnnotationService: "other-name",
			v1beta1.AnnotationPort:    "9999",
		})

		Eventually(deploymentEvents(ns, "web", v1beta1.EventRegistryConflict)).WithTimeout(timeout).WithPolling(poll).
			Should(ContainElement(And(HaveField("Type", corev1.EventTypeWarning), HaveField("Note", ContainSubstring("not controlled by this Deployment")))))
		unchanged := func(g Gomega) {
			cur := &v1beta1.ServiceRegistry{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(handWritten), cur)).To(Succeed())
			g.Expect(cur.UID).To(Equal(original.UID))
			g.Expect(cur.DeletionTimestamp).To(BeNil())
			g.Expect(cur.Spec).To(Equal(original.Spec))
			g.Expect(cur.OwnerReferences).To(BeEmpty())
			g.Expect(cur.Labels).NotTo(HaveKey(v1beta1.LabelDeployment))
			g.Expect(cur.Annotations).NotTo(HaveKey(v1beta1.AnnotationConfigError))
		}
		Consistently(unchanged).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		annotateDeployment(dep, map[string]*string{v1beta1.AnnotationService: nil})
		Consistently(unchanged).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	})

	It("takes over the name once a hand-written ServiceRegistry is deleted", func() {
		handWritten := newRegistry(ns, "blog", "blog")
		newAnnotatedDeployment(ns, "blog", map[string]string{v1beta1.AnnotationService: "blog"})
		Eventually(deploymentEvents(ns, "blog", v1beta1.EventRegistryConflict)).WithTimeout(timeout).WithPolling(poll).ShouldNot(BeEmpty())

		Expect(k8sClient.Delete(ctx, handWritten)).To(Succeed())
		Eventually(func(g Gomega) {
			reg := &v1beta1.ServiceRegistry{}
			g.Expect(k8sClient.Get(ctx, objKey(ns, "blog"), reg)).To(Succeed())
			g.Expect(reg.UID).NotTo(Equal(handWritten.UID))
			g.Expect(metav1.GetControllerOf(reg)).NotTo(BeNil())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("writes specs the API server stores unchanged (annotations.Defaulted mirrors the CRD defaults)", func() {
		spec := v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "defaults"}},
			Ports:    []v1beta1.ServicePort{{Name: "http", Port: 80}},
			Warmup:   &v1beta1.WarmupSpec{Paths: []string{"/"}},
			Drain:    &v1beta1.DrainSpec{Seconds: ptr.To[int32](0)}, // an explicit 0 is kept, not defaulted
		}
		reg := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"}, Spec: spec}
		Expect(k8sClient.Create(ctx, reg)).To(Succeed())
		DeferCleanup(deleteRegistry, reg)
		Expect(getRegistry(reg).Spec).To(Equal(annotations.Defaulted(spec)))
	})
})

func objKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// newAnnotatedDeployment creates a Deployment selecting app=<name> with the given
// annotations. envtest runs no Deployment controller (no pods appear) and no garbage
// collector: cleanup deletes the Deployment, then the registry it owns.
func newAnnotatedDeployment(ns, name string, ann map[string]string) *appsv1.Deployment {
	GinkgoHelper()
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
			},
		},
	}
	Expect(k8sClient.Create(context.Background(), dep)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(k8sClient.Delete(context.Background(), dep))).To(Succeed())
		reg := &v1beta1.ServiceRegistry{}
		err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(dep), reg)
		if err == nil && metav1.IsControlledBy(reg, dep) {
			deleteRegistry(reg)
		}
	})
	return dep
}

// annotateDeployment sets (or, for nil values, removes) annotations of dep.
func annotateDeployment(dep *appsv1.Deployment, set map[string]*string) {
	GinkgoHelper()
	cur := &appsv1.Deployment{}
	Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(dep), cur)).To(Succeed())
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	for k, v := range set {
		if v == nil {
			delete(cur.Annotations, k)
		} else {
			cur.Annotations[k] = *v
		}
	}
	Expect(k8sClient.Patch(context.Background(), cur, patch)).To(Succeed())
	*dep = *cur
}

// eventuallyRegistry waits for the ServiceRegistry ns/name and returns it.
func eventuallyRegistry(ns, name string) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	reg := &v1beta1.ServiceRegistry{}
	Eventually(func() error { return k8sClient.Get(context.Background(), objKey(ns, name), reg) }).
		WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "ServiceRegistry %s/%s was not created", ns, name)
	return reg
}

// deploymentEvents lists the events.k8s.io Events of one reason regarding Deployment name.
func deploymentEvents(ns, name, reason string) func() []eventsv1.Event {
	return func() []eventsv1.Event {
		GinkgoHelper()
		var list eventsv1.EventList
		Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		var out []eventsv1.Event
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "Deployment" && ev.Regarding.Name == name && ev.Reason == reason {
				out = append(out, ev)
			}
		}
		return out
	}
}
