package helm

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/registrar-dev/registrar/test/support/helmtest"
)

// TestHelmInstall installs, upgrades and uninstalls the chart with the helm CLI against a
// real kube-apiserver (envtest; nothing runs the pods): the API server accepts every object
// of the chart's CRDs and templates, and the objects read back with a separate client are
// what the values asked for. Two releases side by side (the default, cert-manager mode, and
// "edge" in self-signed mode) get RBAC that lets each manager patch only its own webhook
// configuration. cert-manager's CRDs are stand-ins (schemaless) so its objects are accepted.
func TestHelmInstall(t *testing.T) {
	c, kube := startAPIServerForHelm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	crd := checkDefaultInstall(ctx, t, c, kube)
	checkUpgrade(ctx, t, c, kube)
	checkSecondRelease(ctx, t, c, kube)
	checkUninstall(ctx, t, c, kube, crd)
}

// startAPIServerForHelm starts envtest's kube-apiserver with cert-manager's stand-in CRDs and
// returns a client and the helm flags that reach it as an admin.
func startAPIServerForHelm(t *testing.T) (client.Client, []string) {
	t.Helper()
	env := &envtest.Environment{CRDs: certManagerStandIns()}
	cfg := helmtest.StartAPIServer(t, env)
	kubeconfig := helmtest.AdminKubeconfig(t, env)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, []string{"--kubeconfig", kubeconfig}
}

// checkDefaultInstall installs the release with the default values and checks what
// config/default would install; it returns the CRD it read.
func checkDefaultInstall(ctx context.Context, t *testing.T, c client.Client, kube []string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	// The default values: what config/default installs.
	if out, err := helm(t, append([]string{"install", release, chartDir, "--namespace", ns, "--create-namespace"}, kube...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "serviceregistries.discovery.registrar.dev"}, crd); err != nil {
		t.Fatalf("CRD from charts/registrar/templates/crds.yaml: %v", err)
	}
	// Its conversion webhook (v1alpha1 <-> v1beta1) is the release's webhook Service, its CA
	// injected by cert-manager; the CRD outlives the release.
	if conv := crd.Spec.Conversion; conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil ||
		conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil ||
		conv.Webhook.ClientConfig.Service.Name != "registrar-webhook-service" || conv.Webhook.ClientConfig.Service.Namespace != ns ||
		conv.Webhook.ClientConfig.Service.Path == nil || *conv.Webhook.ClientConfig.Service.Path != "/convert" {
		t.Errorf("CRD conversion %+v, want the webhook at registrar-webhook-service.%s /convert", crd.Spec.Conversion, ns)
	}
	if a := crd.Annotations; a["cert-manager.io/inject-ca-from"] != ns+"/registrar-serving-cert" || a["helm.sh/resource-policy"] != "keep" {
		t.Errorf("CRD annotations %v", a)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "registrar-controller-manager"}, d); err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; *d.Spec.Replicas != 2 || !slices.Contains(args, "--leader-elect") {
		t.Errorf("manager: %d replicas, args %v", *d.Spec.Replicas, args)
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "registrar-mutating-webhook-configuration"}, mwc); err != nil {
		t.Fatal(err)
	}
	if mwc.Annotations["cert-manager.io/inject-ca-from"] != ns+"/registrar-serving-cert" {
		t.Errorf("webhook configuration annotations %v", mwc.Annotations)
	}
	cert := &unstructured.Unstructured{}
	cert.SetAPIVersion("cert-manager.io/v1")
	cert.SetKind("Certificate")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "registrar-serving-cert"}, cert); err != nil {
		t.Errorf("cert-manager Certificate: %v", err)
	}
	return crd
}

// checkUpgrade upgrades the release with the metrics Service and the xDS server on.
func checkUpgrade(ctx context.Context, t *testing.T, c client.Client, kube []string) {
	t.Helper()
	// An upgrade that turns on the metrics Service and the xDS server.
	if out, err := helm(t, append([]string{"upgrade", release, chartDir, "--namespace", ns, "--set", "metrics.service.enabled=true",
		"--set", "xds.bindAddress=:18000", "--set", "xds.allowInsecure=true", "--set", "xds.service.enabled=true"}, kube...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, name := range []string{"registrar-metrics", "registrar-xds"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{}); err != nil {
			t.Errorf("Service %s after the upgrade: %v", name, err)
		}
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "registrar-controller-manager"}, d); err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--xds-bind-address=:18000") {
		t.Errorf("args after the upgrade %v lack --xds-bind-address=:18000", args)
	}
}

// checkSecondRelease installs a second, self-signed release beside the first and checks that
// each manager may patch only its own webhook configuration.
func checkSecondRelease(ctx context.Context, t *testing.T, c client.Client, kube []string) {
	t.Helper()
	// A second release, self-signed (what make test-e2e installs), in its own namespace; the
	// first release owns the CRD.
	if out, err := helm(t, append([]string{"install", "edge", chartDir, "--namespace", "edge-system", "--create-namespace",
		"--set", "webhook.certificate.mode=selfSigned", "--set", "replicaCount=1", "--set", "crds.install=false"}, kube...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	edge := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "edge-system", Name: "edge-registrar-controller-manager"}, edge); err != nil {
		t.Fatal(err)
	}
	if args := edge.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--webhook-ca-inject=edge-registrar-mutating-webhook-configuration") ||
		!slices.Contains(args, "--webhook-self-signed-hosts=edge-registrar-webhook-service.edge-system.svc,edge-registrar-webhook-service.edge-system.svc.cluster.local") {
		t.Errorf("edge manager args %v", args)
	}
	edgeMWC := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "edge-registrar-mutating-webhook-configuration"}, edgeMWC); err != nil {
		t.Fatal(err)
	}
	if sel := edgeMWC.Webhooks[0].NamespaceSelector; sel == nil || !slices.Contains(sel.MatchExpressions[0].Values, "edge-system") {
		t.Errorf("edge webhook does not leave its own namespace out: %+v", sel)
	}
	// Each manager may patch its own webhook configuration and no other.
	for _, tt := range []struct {
		sa, config string
		allowed    bool
	}{
		{"system:serviceaccount:registrar-system:registrar-controller-manager", "registrar-mutating-webhook-configuration", true},
		{"system:serviceaccount:edge-system:edge-registrar-controller-manager", "edge-registrar-mutating-webhook-configuration", true},
		{"system:serviceaccount:edge-system:edge-registrar-controller-manager", "registrar-mutating-webhook-configuration", false},
		{"system:serviceaccount:registrar-system:registrar-controller-manager", "edge-registrar-mutating-webhook-configuration", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: tt.sa, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: tt.config}}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tt.allowed {
			t.Errorf("%s patch %s: allowed %v, want %v (%s)", tt.sa, tt.config, sar.Status.Allowed, tt.allowed, sar.Status.Reason)
		}
	}
	role := &rbacv1.ClusterRole{}
	if err := c.Get(ctx, client.ObjectKey{Name: "edge-registrar-manager-role"}, role); err != nil {
		t.Fatal(err)
	}
}

// checkUninstall uninstalls the first release: its objects go, the CRD stays.
func checkUninstall(ctx context.Context, t *testing.T, c client.Client, kube []string, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	// Uninstall removes what the release made, but not the CRD (helm.sh/resource-policy: keep,
	// so ServiceRegistries survive).
	if out, err := helm(t, append([]string{"uninstall", release, "--namespace", ns, "--wait"}, kube...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "registrar-controller-manager"}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("manager Deployment still there after helm uninstall: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "registrar-mutating-webhook-configuration"}, &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("webhook configuration after helm uninstall: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "serviceregistries.discovery.registrar.dev"}, crd); err != nil {
		t.Errorf("CRD after helm uninstall: %v", err)
	}
	if out, err := helm(t, append([]string{"list", "--all-namespaces", "-q"}, kube...)...); err != nil || strings.TrimSpace(out) != "edge" {
		t.Errorf("helm list after uninstall: %q, %v; want edge", out, err)
	}
}

// certManagerStandIns are schemaless CRDs for cert-manager's Issuer and Certificate.
func certManagerStandIns() []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"Issuer", "Certificate"} {
		plural := strings.ToLower(kind) + "s"
		out = append(out, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".cert-manager.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "cert-manager.io", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true)}},
				}},
			},
		})
	}
	return out
}
