package controller_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
)

// kstatusOf reads reg from the API server as unstructured, as GitOps tools (Flux, Argo CD
// through gitops-engine) do, and computes its kstatus.
func kstatusOf(reg *v1beta1.ServiceRegistry) func(g Gomega) *status.Result {
	return func(g Gomega) *status.Result {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("ServiceRegistry"))
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(reg), u)).To(Succeed())
		res, err := status.Compute(u)
		g.Expect(err).NotTo(HaveOccurred())
		return res
	}
}

func haveKstatus(s status.Status, reason string) OmegaMatcher {
	m := []OmegaMatcher{HaveField("Status", s)}
	if reason != "" {
		m = append(m, HaveField("Conditions", ContainElement(HaveField("Reason", reason))))
	}
	return And(m...)
}

var _ = Describe("kstatus", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("is Current once every eligible pod is registered", func() {
		reg := newRegistry(ns, "web", "web")
		readyPod(ns, "web-1", web, "10.0.0.1")
		eventuallyStored("web", ns).Should(ConsistOf("web-1"))
		Eventually(kstatusOf(reg)).WithTimeout(timeout).Should(haveKstatus(status.CurrentStatus, ""))
		Expect(condition(reg, v1beta1.ConditionReady)()).To(haveCondition(metav1.ConditionTrue, "AllRegistered"))
		Expect(condition(reg, v1beta1.ConditionReconciling)()).To(BeNil())
		Expect(condition(reg, v1beta1.ConditionStalled)()).To(BeNil())
		Expect(kubectlWaitReady(ns, reg.Name, "30s")).To(Succeed())
	})

	It("is InProgress while a pod warms up, also after a new generation was evaluated", func() {
		srv := startPodServer("127.0.0.3", http.StatusOK, 0)
		reg := newGatedRegistry(ns, "web", v1beta1.WarmupSpec{
			Paths: []string{"/warm"}, Requests: 1,
			TimeoutMillis:     600000,
			MinDurationMillis: ptr.To[int32](600000),
		})
		pod := gatedPod(ns, "web-1", srv)
		setPodStatus(pod, corev1.PodRunning, srv.ip, true)

		Eventually(kstatusOf(reg)).WithTimeout(timeout).Should(haveKstatus(status.InProgressStatus, "WarmingUp"))
		Expect(condition(reg, v1beta1.ConditionReconciling)()).To(haveCondition(metav1.ConditionTrue, "WarmingUp"))

		// A new generation: kstatus says InProgress until observedGeneration catches up
		// (LatestGenerationNotObserved), and after that because the pod still warms up.
		updateRegistry(reg, func(r *v1beta1.ServiceRegistry) { r.Spec.Drain = &v1beta1.DrainSpec{Seconds: ptr.To[int32](20)} })
		Eventually(func(g Gomega) {
			cur := getRegistry(reg)
			g.Expect(cur.Generation).To(BeNumerically(">", 1))
			g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(kstatusOf(reg)(Default)).To(haveKstatus(status.InProgressStatus, "WarmingUp"))
		Expect(storedPods("web", ns)).To(BeEmpty())
	})

	It("is Failed while another owner holds a pod's store key", func() {
		putRaw(key("web", ns, "web-1"), store.Endpoint{Service: "web", Namespace: ns, Pod: "web-1", Address: "10.9.9.9", Owner: "another-installation"})
		reg := newRegistry(ns, "web", "web")
		readyPod(ns, "web-1", web, "10.0.0.1")

		Eventually(kstatusOf(reg)).WithTimeout(timeout).Should(haveKstatus(status.FailedStatus, "KeyConflict"))
		Expect(condition(reg, v1beta1.ConditionStalled)()).To(haveCondition(metav1.ConditionTrue, "KeyConflict"))
		Expect(condition(reg, v1beta1.ConditionReady)()).To(haveCondition(metav1.ConditionFalse, "KeyConflict"))
		Expect(kubectlWaitReady(ns, reg.Name, "1s")).NotTo(Succeed())
	})
})

// kubectlWaitReady runs `kubectl wait --for=condition=Ready` against the suite's API
// server, as a user or a CI script would. The spec is skipped, and says so, without kubectl.
func kubectlWaitReady(ns, name, timeout string) error {
	GinkgoHelper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		Skip("kubectl is not on PATH: `kubectl wait` not checked")
	}
	user, err := testEnv.AddUser(envtest.User{Name: "kubectl-wait", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", path, "wait", "--for=condition=Ready",
		"serviceregistry/"+name, "-n", ns, "--timeout="+timeout).CombinedOutput()
	GinkgoWriter.Printf("kubectl wait: %s (%v)\n", out, err)
	return err
}
