//go:build e2e

// Package e2e runs registrar on a real single-node cluster (hack/cluster: kubelet,
// containerd, the control plane built from source) and proves the choreography with
// requests. Run it with `make test-e2e`.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/test/e2e/install"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// Settings from the environment (make test-e2e sets them from the cluster harness).
var (
	kubeconfigPath = envOr("E2E_KUBECONFIG", "../../bin/cluster/admin.kubeconfig")
	nodeIP         = envOr("E2E_NODE_IP", "10.88.77.1")
	installYAML    = envOr("E2E_INSTALL", "../../dist/install.yaml")
	// E2E_INSTALL_METHOD=helm installs with `helm upgrade --install` of charts/registrar
	// (E2E_HELM: the helm binary) instead of applying dist/install.yaml (docs/helm.md).
	installMethod = envOr("E2E_INSTALL_METHOD", "kustomize")
	// E2E_UNINSTALL=1 removes the install at the end of the suite (every ServiceRegistry, then
	// the install's objects and CRD), so that hack/ci-e2e.sh can install again, with the other
	// method, on the same cluster.
	uninstallAfter = os.Getenv("E2E_UNINSTALL") == "1"
	// E2E_STORE=bundled installs registrar with the etcd it bundles (config/components/etcd,
	// the chart's etcd.enabled) and points the suite's callers at it; the default, host, runs
	// a real etcd on the host for the manager and the callers (the comparison's TTL setups
	// register into it too, so they need host). E2E_PV_DIR holds the bundled members' volumes.
	storeMode = envOr("E2E_STORE", "host")
	pvDir     = envOr("E2E_PV_DIR", "../../bin/cluster/pv")
)

var (
	restCfg     *rest.Config
	scheme      = runtime.NewScheme()
	k8s         client.WithWatch
	storeServer *etcdtest.Server
	storeClient *clientv3.Client
	// installStoreEndpoint is the store the suite installed registrar with ("": the bundled
	// one), helmCLI how it runs helm: an upgrade installs the same way.
	installStoreEndpoint string
	helmCLI              install.Helm
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "registrar end-to-end (real kubelet)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1beta1.AddToScheme(scheme)).To(Succeed())
	var err error
	restCfg, err = clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	Expect(err).NotTo(HaveOccurred(), "no cluster: run `make cluster-up` (or `make test-e2e`, which does)")
	k8s, err = client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	Expect(storeMode).To(BeElementOf("host", "bundled"), "E2E_STORE")
	storeEndpoint := "" // the bundled store: the install's own endpoints
	if storeMode == "host" {
		// The store: a real etcd on the pod bridge, reachable from pods and from callers here.
		dir, err := os.MkdirTemp("", "registrar-e2e-store-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		storeServer, err = etcdtest.StartOn(dir, nodeIP)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(storeServer.Stop)
		storeClient, err = storeServer.Client()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(storeClient.Close)
		storeEndpoint = storeServer.Endpoint()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	helm := install.Helm{Bin: os.Getenv("E2E_HELM"), Chart: "../../charts/registrar", Kubeconfig: kubeconfigPath}
	helmCLI, installStoreEndpoint = helm, storeEndpoint
	if storeMode == "bundled" {
		pvDir, err = filepath.Abs(pvDir)
		Expect(err).NotTo(HaveOccurred())
		Expect(install.ProvideVolumes(ctx, k8s, pvDir, install.EtcdReplicas)).To(Succeed())
		if uninstallAfter {
			// Runs after the uninstall below (cleanups run last-registered first): the claims
			// are gone by then and the volumes released.
			DeferCleanup(func() { Expect(install.RemoveVolumes(context.Background(), k8s, pvDir)).To(Succeed()) })
		}
	}
	if uninstallAfter {
		// Registered before the install so that a half-done install is removed too; it runs
		// before the store's cleanup above (the manager empties the store as registries go).
		DeferCleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			start := time.Now()
			Expect(install.Uninstall(ctx, k8s, installMethod, filepath.Clean(installYAML), helm)).To(Succeed())
			fmt.Fprintf(GinkgoWriter, "uninstalled (%s) in %s\n", installMethod, time.Since(start).Round(time.Millisecond))
		})
	}
	start := time.Now()
	if installMethod == "helm" {
		Expect(install.HelmRegistrar(ctx, k8s, restCfg, helm, storeEndpoint)).To(Succeed(),
			"registrar (helm install) did not become available with its webhook CA injected (%s)", install.MembersState(ctx, k8s))
	} else {
		Expect(install.Registrar(ctx, k8s, restCfg, filepath.Clean(installYAML), storeEndpoint)).To(Succeed(),
			"registrar did not become available with its webhook CA injected (%s)", install.MembersState(ctx, k8s))
	}
	if storeMode == "bundled" {
		Expect(install.WaitStore(ctx, k8s, 3*time.Minute)).To(Succeed())
		fmt.Fprintf(GinkgoWriter, "installed (%s) with the bundled store in %s: %s\n", installMethod,
			time.Since(start).Round(time.Millisecond), install.MembersState(ctx, k8s))
		storeClient, err = install.StoreClient(ctx, k8s)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(storeClient.Close)
	}
	waitWebhookServing(ctx)
})

// waitWebhookServing waits until the API server calls the pod webhook end to end: it loads
// webhook configurations (and their caBundle) asynchronously, and a pod admitted before
// that is created without the gate (failurePolicy Ignore), whichever spec runs first.
func waitWebhookServing(ctx context.Context) {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-probe-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "probe"},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
			Ports:     []v1beta1.ServicePort{{Name: "http", Port: install.DemoPort}},
			Injection: &v1beta1.InjectionSpec{Enabled: ptr.To(true)},
		},
	}
	Expect(k8s.Create(ctx, reg)).To(Succeed())
	start := time.Now()
	Eventually(func(g Gomega) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "probe-", Labels: map[string]string{"app": "probe"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: install.DemoImage}}},
		}
		g.Expect(k8s.Create(ctx, p, client.DryRunAll)).To(Succeed())
		g.Expect(p.Annotations).To(HaveKey(v1beta1.AnnotationInjected))
	}).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).Should(Succeed(), "the API server never called the pod webhook")
	fmt.Fprintf(GinkgoWriter, "pod webhook serving %s after the install was available\n", time.Since(start).Round(time.Millisecond))
}
