package webhook_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eventqueue"
	podwebhook "github.com/registrar-dev/registrar/internal/webhook"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

// The suite runs a real kube-apiserver + etcd (envtest) with the webhook configuration from
// config/webhook (pointed by envtest at a local URL with its own CA), and a manager serving
// the pod webhook in-process. Assertions read the API server through k8sClient (no cache).
var (
	testEnv   *envtest.Environment
	restCfg   *rest.Config
	scheme    *runtime.Scheme
	k8sClient client.Client
	// mgrClient is the manager's cached client, the one the webhook lists registries with;
	// specs wait until it sees their ServiceRegistry before creating pods.
	mgrClient client.Client
	stopMgr   context.CancelFunc
	mgrDone   chan struct{}
)

const timeout = 20 * time.Second

func TestWebhook(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Pod Webhook Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	env, err := testenv.Start(testenv.Options{Webhooks: true})
	Expect(err).NotTo(HaveOccurred())
	testEnv, restCfg, k8sClient, scheme = env.Environment, env.Config, env.Client, env.Scheme
	Expect(testEnv.WebhookInstallOptions.MutatingWebhooks).To(HaveLen(1), "config/webhook/manifests.yaml should hold the pod webhook")

	wio := testEnv.WebhookInstallOptions
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: crwebhook.NewServer(crwebhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		}),
	})
	Expect(err).NotTo(HaveOccurred())
	events := eventqueue.New(eventqueue.Config{Scheme: mgr.GetScheme(), Controller: "registrar",
		Create: eventqueue.ClientCreate(mgr.GetClient())})
	Expect(mgr.Add(events)).To(Succeed())
	Expect(podwebhook.Register(mgr, events)).To(Succeed())
	mgrClient = mgr.GetClient()

	ctx, cancel := context.WithCancel(context.Background())
	stopMgr, mgrDone = cancel, make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	started := mgr.GetWebhookServer().StartedChecker()
	Eventually(func() error { return started(nil) }).WithTimeout(timeout).Should(Succeed(), "webhook server not serving")

	// The API server loads webhook configurations asynchronously, and a pod created before it
	// calls the webhook is admitted unchanged (failurePolicy Ignore). Probe until a pod is
	// injected end to end, so that no spec races the API server's configuration cache.
	ns := newNamespace()
	reg := newRegistry(ns, "probe", map[string]string{"app": "probe"}, 1, true)
	Eventually(func(g Gomega) {
		p := newPod(ns, "probe-", map[string]string{"app": "probe"}, container("app", 8080))
		g.Expect(k8sClient.Create(context.Background(), p)).To(Succeed())
		defer func() { _ = k8sClient.Delete(context.Background(), p) }()
		g.Expect(p.Annotations).To(HaveKey(v1beta1.AnnotationInjected))
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(Succeed(), "the API server never called the webhook")
	Expect(k8sClient.Delete(context.Background(), reg)).To(Succeed())
})

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
		Eventually(mgrDone).WithTimeout(30 * time.Second).Should(BeClosed())
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// newNamespace creates a namespace of the spec's own.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-test-"}}
	Expect(k8sClient.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// newRegistry creates a ServiceRegistry selecting podLabels with port http=8080 and the given
// drain, and waits until the webhook's (cached) client sees it as created.
func newRegistry(ns, name string, podLabels map[string]string, drain int32, inject bool) *v1beta1.ServiceRegistry {
	GinkgoHelper()
	port := int32(8080)
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector:  metav1.LabelSelector{MatchLabels: podLabels},
			Ports:     []v1beta1.ServicePort{{Name: "http", Port: port}},
			Drain:     &v1beta1.DrainSpec{Seconds: ptr.To(drain)},
			Injection: &v1beta1.InjectionSpec{Enabled: ptr.To(inject)},
		},
	}
	// Created unstructured: drain.seconds is `omitempty` with a CRD default of 15, so a typed
	// client cannot send an explicit 0.
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(reg)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("ServiceRegistry"))
	Expect(unstructured.SetNestedField(u.Object, int64(drain), "spec", "drain", "seconds")).To(Succeed())
	Expect(k8sClient.Create(context.Background(), u)).To(Succeed())
	Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(reg), reg)).To(Succeed())
	Expect(reg.Spec.Drain).NotTo(BeNil())
	Expect(reg.Spec.Drain.Seconds).To(HaveValue(Equal(drain)))
	Eventually(func(g Gomega) {
		var seen v1beta1.ServiceRegistry
		g.Expect(mgrClient.Get(context.Background(), client.ObjectKeyFromObject(reg), &seen)).To(Succeed())
		g.Expect(seen.Generation).To(Equal(reg.Generation))
	}).WithTimeout(timeout).Should(Succeed(), "the webhook's cache never saw ServiceRegistry %s/%s", ns, name)
	return reg
}

func container(name string, ports ...int32) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.example/app:1"}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: p})
	}
	return c
}

// newPod builds (does not create) a pod with generateName.
func newPod(ns, generateName string, podLabels map[string]string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: generateName, Labels: podLabels},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}
