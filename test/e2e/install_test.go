//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	registrarNamespace = "registrar-system"
	registrarName      = "registrar-controller-manager"
	webhookConfigName  = "registrar-mutating-webhook-configuration"
)

// installRegistrar applies dist/install.yaml (make build-installer with the self-signed
// overlay and the locally imported image) the way a user would, adapting only what this
// harness needs: the manager runs on the host network (there is no kube-proxy, so it talks
// to the API server and the store directly) and points at the suite's store.
func installRegistrar(ctx context.Context, path string) {
	GinkgoHelper()
	objs := readManifests(path)
	for _, u := range objs {
		if u.GetKind() == "Deployment" && u.GetName() == registrarName {
			u = adaptManager(u)
		}
		Expect(k8s.Patch(ctx, u, client.Apply, client.FieldOwner("registrar-e2e"), client.ForceOwnership)).
			To(Succeed(), "apply %s %s", u.GetKind(), u.GetName())
	}
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: registrarNamespace, Name: registrarName}, d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.Replicas).To(Equal(*d.Spec.Replicas), "an old manager pod is still there")
		w := &admissionregistrationv1.MutatingWebhookConfiguration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: webhookConfigName}, w)).To(Succeed())
		g.Expect(w.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty())
	}).Should(Succeed(), "registrar did not become available with its webhook CA injected")
}

func readManifests(path string) []*unstructured.Unstructured {
	GinkgoHelper()
	raw, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred(), "build it with: make build-installer IMG=registrar.dev/registrar:local INSTALL_OVERLAY=config/default-selfsigned")
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		Expect(err).NotTo(HaveOccurred())
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		Expect(utilyaml.Unmarshal(doc, &u.Object)).To(Succeed())
		objs = append(objs, u)
	}
}

func adaptManager(u *unstructured.Unstructured) *unstructured.Unstructured {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d)).To(Succeed())
	api, err := url.Parse(restCfg.Host)
	Expect(err).NotTo(HaveOccurred())
	host, port, err := net.SplitHostPort(api.Host)
	Expect(err).NotTo(HaveOccurred())

	spec := &d.Spec.Template.Spec
	spec.HostNetwork = true
	spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	c := &spec.Containers[0]
	c.ImagePullPolicy = corev1.PullNever
	var args []string
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--store-endpoints="), strings.HasPrefix(a, "--metrics-bind-address="),
			strings.HasPrefix(a, "--health-probe-bind-address="):
		default:
			args = append(args, a)
		}
	}
	c.Args = append(args, "--store-endpoints="+storeServer.Endpoint(), "--metrics-bind-address=:18080",
		"--health-probe-bind-address=:18081", "--zap-log-level=debug")
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: host},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: port})
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p != nil && p.HTTPGet != nil {
			p.HTTPGet.Port = intstr.FromInt32(18081)
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Name == "metrics" {
			c.Ports[i].ContainerPort = 18080
		}
	}
	d.Spec.Replicas = ptr.To[int32](1)
	// On the host network a new manager pod cannot start beside the old one (same ports).
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	Expect(err).NotTo(HaveOccurred())
	out := &unstructured.Unstructured{Object: obj}
	out.SetAPIVersion("apps/v1")
	out.SetKind("Deployment")
	unstructured.RemoveNestedField(out.Object, "status")
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(out.Object, "spec", "template", "metadata", "creationTimestamp")
	return out
}
