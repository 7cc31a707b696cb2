// Package manifests renders the kustomize installs (config/default, config/default-selfsigned)
// with the kustomize library and checks the objects a cluster would receive.
package manifests

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	ns          = "registrar-system"
	manager     = "registrar-controller-manager"
	webhookName = "registrar-mutating-webhook-configuration"
	crdName     = "serviceregistries.discovery.registrar.dev"
)

func render(t *testing.T, dir string) map[string]*resource.Resource {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), "../../config/"+dir)
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	out := map[string]*resource.Resource{}
	for _, r := range resMap.Resources() {
		out[r.GetKind()+"/"+r.GetName()] = r
	}
	return out
}

func decode[T any](t *testing.T, objs map[string]*resource.Resource, key string) *T {
	t.Helper()
	r, ok := objs[key]
	if !ok {
		t.Fatalf("%s not rendered; have %v", key, keys(objs))
	}
	m, err := r.Map()
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &out); err != nil {
		t.Fatalf("decode %s: %v", key, err)
	}
	return &out
}

func keys(m map[string]*resource.Resource) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkCommon asserts what both installs share: namespace, CRD, RBAC bound to the manager's
// ServiceAccount, a hardened manager with probes and resources, and the webhook wiring.
func checkCommon(t *testing.T, objs map[string]*resource.Resource) *appsv1.Deployment {
	t.Helper()
	for _, k := range []string{"Namespace/" + ns, "CustomResourceDefinition/serviceregistries.discovery.registrar.dev",
		"ServiceAccount/" + manager, "Service/registrar-webhook-service", "Role/registrar-leader-election-role"} {
		if _, ok := objs[k]; !ok {
			t.Errorf("%s not rendered", k)
		}
	}
	binding := decode[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding/registrar-manager-rolebinding")
	if binding.RoleRef.Name != "registrar-manager-role" || binding.Subjects[0].Name != manager || binding.Subjects[0].Namespace != ns {
		t.Errorf("manager ClusterRoleBinding = %+v", binding)
	}
	d := decode[appsv1.Deployment](t, objs, "Deployment/"+manager)
	if d.Namespace != ns {
		t.Errorf("manager in namespace %q", d.Namespace)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("manager args %v lack --leader-elect", c.Args)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Error("manager has no liveness or readiness probe")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("manager resources %+v", c.Resources)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("manager container security context %+v", sc)
	}
	if psc := d.Spec.Template.Spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("manager pod security context %+v", psc)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook-server" && p.ContainerPort == 9443 }) {
		t.Errorf("manager ports %+v lack webhook-server 9443", c.Ports)
	}
	w := decode[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration/"+webhookName)
	svc := w.Webhooks[0].ClientConfig.Service
	if svc == nil || svc.Name != "registrar-webhook-service" || svc.Namespace != ns || w.Webhooks[0].FailurePolicy == nil ||
		*w.Webhooks[0].FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("webhook %+v", w.Webhooks[0])
	}
	checkWebhookScope(t, w.Webhooks[0], true)
	checkConversion(t, objs)
	return d
}

// checkConversion asserts the ServiceRegistry CRD as the installs ship it: v1beta1 served and
// stored, v1alpha1 served and deprecated, converted by the manager's /convert behind the
// webhook Service.
func checkConversion(t *testing.T, objs map[string]*resource.Resource) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := decode[apiextensionsv1.CustomResourceDefinition](t, objs, "CustomResourceDefinition/"+crdName)
	versions := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
	for _, v := range crd.Spec.Versions {
		versions[v.Name] = v
	}
	if b := versions["v1beta1"]; !b.Served || !b.Storage || b.Deprecated {
		t.Errorf("v1beta1 served=%v storage=%v deprecated=%v, want served, stored, not deprecated", b.Served, b.Storage, b.Deprecated)
	}
	if a := versions["v1alpha1"]; !a.Served || a.Storage || !a.Deprecated || a.DeprecationWarning == nil {
		t.Errorf("v1alpha1 served=%v storage=%v deprecated=%v warning=%v, want served, not stored, deprecated with a warning", a.Served, a.Storage, a.Deprecated, a.DeprecationWarning)
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil ||
		conv.Webhook.ClientConfig.Service == nil || !slices.Contains(conv.Webhook.ConversionReviewVersions, "v1") {
		t.Fatalf("CRD conversion %+v, want a webhook behind a Service", conv)
	}
	svc := conv.Webhook.ClientConfig.Service
	if svc.Name != "registrar-webhook-service" || svc.Namespace != ns || svc.Path == nil || *svc.Path != "/convert" {
		t.Errorf("conversion webhook Service %s/%s path %v, want %s/registrar-webhook-service /convert", svc.Namespace, svc.Name, svc.Path, ns)
	}
	return crd
}

// checkWebhookScope asserts the pod webhook's scope and timeout (docs/webhook.md): at most 5 s
// (not the API server's default 10 s), failurePolicy Ignore, pods and namespaces labelled
// registrar.dev/webhook=disabled left out, and — where the install sets the namespace
// selector (kustomize; OLM sets its own) — kube-system, kube-node-lease, kube-public and
// registrar's own namespace left out.
func checkWebhookScope(t *testing.T, w admissionregistrationv1.MutatingWebhook, namespaces bool) {
	t.Helper()
	if w.TimeoutSeconds == nil || *w.TimeoutSeconds < 1 || *w.TimeoutSeconds > 5 {
		t.Errorf("webhook timeoutSeconds %v, want 1..5", w.TimeoutSeconds)
	}
	if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("webhook failurePolicy %v, want Ignore", w.FailurePolicy)
	}
	optOut := metav1.LabelSelectorRequirement{Key: "registrar.dev/webhook", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"}}
	if w.ObjectSelector == nil || !slices.ContainsFunc(w.ObjectSelector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
		return reflect.DeepEqual(r, optOut)
	}) {
		t.Errorf("webhook objectSelector %+v lacks %+v", w.ObjectSelector, optOut)
	}
	if !namespaces {
		return
	}
	if w.NamespaceSelector == nil {
		t.Fatal("webhook has no namespaceSelector: it is called for every pod in the cluster")
	}
	sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
	if err != nil {
		t.Fatalf("webhook namespaceSelector: %v", err)
	}
	for _, name := range []string{"kube-system", "kube-node-lease", "kube-public", ns} {
		if sel.Matches(labels.Set{"kubernetes.io/metadata.name": name}) {
			t.Errorf("webhook namespaceSelector %q selects namespace %s", sel, name)
		}
	}
	if !sel.Matches(labels.Set{"kubernetes.io/metadata.name": "shop"}) {
		t.Errorf("webhook namespaceSelector %q does not select an ordinary namespace", sel)
	}
	if sel.Matches(labels.Set{"kubernetes.io/metadata.name": "shop", "registrar.dev/webhook": "disabled"}) {
		t.Errorf("webhook namespaceSelector %q selects a namespace labelled registrar.dev/webhook=disabled", sel)
	}
}

func TestDefaultInstall(t *testing.T) {
	objs := render(t, "default")
	d := checkCommon(t, objs)
	w := decode[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration/"+webhookName)
	if got := w.Annotations["cert-manager.io/inject-ca-from"]; got != ns+"/registrar-serving-cert" {
		t.Errorf("cert-manager.io/inject-ca-from = %q", got)
	}
	if got := checkConversion(t, objs).Annotations["cert-manager.io/inject-ca-from"]; got != ns+"/registrar-serving-cert" {
		t.Errorf("CRD cert-manager.io/inject-ca-from = %q, want the serving certificate's CA in the conversion webhook", got)
	}
	cert, ok := objs["Certificate/registrar-serving-cert"]
	if !ok {
		t.Fatal("no cert-manager Certificate")
	}
	m, _ := cert.Map()
	if !strings.Contains(strings.Join(dnsNames(m), ","), "registrar-webhook-service."+ns+".svc") {
		t.Errorf("certificate dnsNames %v", dnsNames(m))
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "webhook-server-cert"
	}) {
		t.Error("manager does not mount the cert-manager Secret")
	}
}

func TestSelfSignedInstall(t *testing.T) {
	objs := render(t, "default-selfsigned")
	d := checkCommon(t, objs)
	if _, ok := objs["Certificate/registrar-serving-cert"]; ok {
		t.Error("the self-signed install renders a cert-manager Certificate")
	}
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d, want 1", *d.Spec.Replicas)
	}
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	if a := checkConversion(t, objs).Annotations; a["cert-manager.io/inject-ca-from"] != "" {
		t.Errorf("the self-signed install's CRD asks cert-manager for its CA: %v", a)
	}
	const certSecret = "registrar-webhook-self-signed-cert"
	for _, want := range []string{"--webhook-ca-inject=" + webhookName, "--webhook-ca-inject-crd=" + crdName,
		"--webhook-self-signed-hosts=registrar-webhook-service." + ns + ".svc", "--webhook-self-signed-secret=" + certSecret} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %q lack %q", args, want)
		}
	}
	role := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/registrar-manager-role")
	for resource, name := range map[string]string{"mutatingwebhookconfigurations": webhookName, "customresourcedefinitions": crdName} {
		if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, resource) && slices.Contains(r.ResourceNames, name) && slices.Contains(r.Verbs, "patch")
		}) {
			t.Errorf("the manager may not patch %s %s: %+v", resource, name, role.Rules)
		}
	}
	// The certificate every manager pod serves with is kept in a Secret the install ships
	// empty, which the manager may read and fill.
	if sec := decode[corev1.Secret](t, objs, "Secret/"+certSecret); sec.Namespace != ns || len(sec.Data) != 0 {
		t.Errorf("Secret %s in %q with data %v, want it empty in %s", certSecret, sec.Namespace, sec.Data, ns)
	}
	certRole := decode[rbacv1.Role](t, objs, "Role/registrar-webhook-cert")
	if len(certRole.Rules) != 1 || !slices.Equal(certRole.Rules[0].ResourceNames, []string{certSecret}) || !slices.Equal(certRole.Rules[0].Verbs, []string{"get", "update"}) {
		t.Errorf("Role registrar-webhook-cert rules %+v, want get and update of %s", certRole.Rules, certSecret)
	}
	bind := decode[rbacv1.RoleBinding](t, objs, "RoleBinding/registrar-webhook-cert")
	if bind.RoleRef.Name != "registrar-webhook-cert" || len(bind.Subjects) != 1 || bind.Subjects[0].Name != manager || bind.Subjects[0].Namespace != ns {
		t.Errorf("RoleBinding registrar-webhook-cert %+v", bind)
	}
}

func dnsNames(m map[string]any) []string {
	spec, _ := m["spec"].(map[string]any)
	raw, _ := spec["dnsNames"].([]any)
	var out []string
	for _, n := range raw {
		if s, ok := n.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
