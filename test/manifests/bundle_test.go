package manifests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/registrar-dev/registrar/test/support/helmtest"
)

const (
	bundleDir = "../../bundle"
	csvFile   = bundleDir + "/manifests/registrar.clusterserviceversion.yaml"
	crdFile   = bundleDir + "/manifests/discovery.registrar.dev_serviceregistries.yaml"
)

// readStrict decodes a bundle manifest into out, failing on unknown fields.
func readStrict(t *testing.T, path string, out any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `make bundle`)", err)
	}
	if err := yaml.UnmarshalStrict(raw, out); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

func readCSV(t *testing.T) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	readStrict(t, csvFile, csv)
	return csv
}

// TestBundleManifests parses every file of the bundle and checks that the CSV owns the CRD
// shipped beside it, installs the manager Deployment the kustomize install has, grants it
// the generated RBAC, and serves the webhook from that Deployment.
func TestBundleManifests(t *testing.T) {
	files, _ := filepath.Glob(bundleDir + "/manifests/*.yaml")
	if len(files) != 2 {
		t.Fatalf("bundle/manifests holds %v, want the CSV and the CRD", files)
	}
	var annotations struct {
		Annotations map[string]string `json:"annotations"`
	}
	readStrict(t, bundleDir+"/metadata/annotations.yaml", &annotations)
	if annotations.Annotations["operators.operatorframework.io.bundle.package.v1"] != "registrar" ||
		annotations.Annotations["operators.operatorframework.io.bundle.mediatype.v1"] != "registry+v1" {
		t.Errorf("bundle annotations %v", annotations.Annotations)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	readStrict(t, crdFile, crd)
	csv := readCSV(t)

	checkOwned(t, csv, crd)
	checkInstallModes(t, csv.Spec.InstallModes)
	checkDeployment(t, csv)
}

func checkOwned(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	owned := csv.Spec.CustomResourceDefinitions.Owned
	storage := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Storage })
	if storage < 0 || len(owned) != 1 || owned[0].Name != crd.Name || owned[0].Kind != crd.Spec.Names.Kind || owned[0].Version != crd.Spec.Versions[storage].Name {
		t.Fatalf("owned CRDs %+v do not match the bundle's CRD %s (its storage version)", owned, crd.Name)
	}
	spec := crd.Spec.Versions[storage].Schema.OpenAPIV3Schema.Properties["spec"]
	for _, d := range owned[0].SpecDescriptors {
		if !hasPath(spec, d.Path) || d.Description == "" || d.DisplayName == "" {
			t.Errorf("spec descriptor %+v: no such field in the CRD schema, or undescribed", d)
		}
	}
	status := crd.Spec.Versions[storage].Schema.OpenAPIV3Schema.Properties["status"]
	for _, d := range owned[0].StatusDescriptors {
		if !hasPath(status, d.Path) || d.Description == "" {
			t.Errorf("status descriptor %+v: no such field in the CRD schema, or undescribed", d)
		}
	}
	for _, want := range []string{"selector", "serviceName", "drain.seconds", "warmup.paths"} {
		if !slices.ContainsFunc(owned[0].SpecDescriptors, func(d operatorsv1alpha1.SpecDescriptor) bool { return d.Path == want }) {
			t.Errorf("no spec descriptor for %s", want)
		}
	}
	if !slices.ContainsFunc(owned[0].StatusDescriptors, func(d operatorsv1alpha1.StatusDescriptor) bool {
		return d.Path == "conditions" && slices.Contains(d.XDescriptors, "urn:alm:descriptor:io.kubernetes.conditions")
	}) {
		t.Error("no conditions status descriptor")
	}
}

func hasPath(s apiextensionsv1.JSONSchemaProps, path string) bool {
	for _, p := range strings.Split(path, ".") {
		next, ok := s.Properties[p]
		if !ok {
			return false
		}
		s = next
	}
	return true
}

func checkInstallModes(t *testing.T, modes []operatorsv1alpha1.InstallMode) {
	t.Helper()
	seen := map[operatorsv1alpha1.InstallModeType]bool{}
	for _, m := range modes {
		if _, dup := seen[m.Type]; dup {
			t.Errorf("install mode %s listed twice", m.Type)
		}
		seen[m.Type] = m.Supported
	}
	// The manager watches pods, nodes and node Leases cluster-wide: all namespaces only.
	want := map[operatorsv1alpha1.InstallModeType]bool{
		operatorsv1alpha1.InstallModeTypeOwnNamespace: false, operatorsv1alpha1.InstallModeTypeSingleNamespace: false,
		operatorsv1alpha1.InstallModeTypeMultiNamespace: false, operatorsv1alpha1.InstallModeTypeAllNamespaces: true,
	}
	for typ, supported := range want {
		if got, ok := seen[typ]; !ok || got != supported {
			t.Errorf("install mode %s supported=%v (listed %v), want %v", typ, got, ok, supported)
		}
	}
}

func checkDeployment(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) {
	t.Helper()
	objs := render(t, "default")
	kustomized := decode[rbacClusterRole](t, objs, "ClusterRole/registrar-manager-role")
	install := csv.Spec.InstallStrategy.StrategySpec
	if csv.Spec.InstallStrategy.StrategyName != operatorsv1alpha1.InstallStrategyNameDeployment || len(install.DeploymentSpecs) != 1 {
		t.Fatalf("install strategy %+v", csv.Spec.InstallStrategy)
	}
	dep := install.DeploymentSpecs[0]
	if dep.Name != manager {
		t.Errorf("deployment %q, want %q", dep.Name, manager)
	}
	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName != manager || len(pod.Containers) != 1 || pod.Containers[0].Image != csv.Annotations["containerImage"] {
		t.Errorf("deployment pod spec: serviceAccount %q, containers %+v", pod.ServiceAccountName, pod.Containers)
	}
	if !slices.ContainsFunc(pod.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook-server" && p.ContainerPort == 9443 }) {
		t.Errorf("manager ports %+v lack webhook-server 9443", pod.Containers[0].Ports)
	}
	if len(install.ClusterPermissions) != 1 || install.ClusterPermissions[0].ServiceAccountName != manager ||
		!jsonEqual(install.ClusterPermissions[0].Rules, kustomized.Rules) {
		t.Errorf("clusterPermissions %+v, want the rules of config/rbac/role.yaml for %s", install.ClusterPermissions, manager)
	}
	if len(install.Permissions) != 1 || !slices.ContainsFunc(install.Permissions[0].Rules, func(r rbacPolicyRule) bool {
		return slices.Contains(r.Resources, "leases") && slices.Contains(r.Verbs, "create")
	}) {
		t.Errorf("permissions %+v lack the leader election rules", install.Permissions)
	}
	hooks := csv.Spec.WebhookDefinitions
	if len(hooks) != 2 || hooks[0].DeploymentName != manager || hooks[0].Type != operatorsv1alpha1.MutatingAdmissionWebhook ||
		hooks[0].TargetPort == nil || hooks[0].TargetPort.IntValue() != 9443 || hooks[0].WebhookPath == nil || *hooks[0].WebhookPath != "/mutate--v1-pod" {
		t.Errorf("webhook definitions %+v, want the pod webhook and the conversion webhook", hooks)
	}
	checkConversionWebhook(t, hooks)
	if len(hooks) >= 1 {
		// OLM sets the namespaceSelector itself (the OperatorGroup's namespaces).
		checkWebhookScope(t, admissionregistrationv1.MutatingWebhook{TimeoutSeconds: hooks[0].TimeoutSeconds,
			FailurePolicy: hooks[0].FailurePolicy, ObjectSelector: hooks[0].ObjectSelector}, false)
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestBundleValidators runs operator-framework/api's validators (what `operator-sdk bundle
// validate` runs) on the bundle directory; errors fail, warnings are logged.
func TestBundleValidators(t *testing.T) {
	b, err := manifests.GetBundleFromDir(bundleDir)
	if err != nil {
		t.Fatalf("load bundle: %v", err)
	}
	validators := validation.DefaultBundleValidators.WithValidators(
		validation.OperatorHubV2Validator, validation.StandardCapabilitiesValidator, validation.StandardCategoriesValidator,
		validation.ObjectValidator, validation.GoodPracticesValidator)
	for _, r := range validators.Validate(b.ObjectsToValidate()...) {
		for _, e := range r.Errors {
			t.Errorf("%s: %v", r.Name, e)
		}
		for _, w := range r.Warnings {
			t.Logf("warning: %s: %v", r.Name, w)
		}
	}
}

// TestAlmExamplesAgainstAPIServer sends every alm-example to a real kube-apiserver that has
// the bundle's CRD, as a server-side dry run: the OpenAPI schema and the CEL rules of the
// CRD judge them, as they will judge a user who copies them from the console.
func TestAlmExamplesAgainstAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds kube-apiserver and etcd")
	}
	var examples []map[string]any
	if err := json.Unmarshal([]byte(readCSV(t).Annotations["alm-examples"]), &examples); err != nil || len(examples) == 0 {
		t.Fatalf("alm-examples: %v (%d examples)", err, len(examples))
	}
	cfg := helmtest.StartAPIServer(t, &envtest.Environment{CRDDirectoryPaths: []string{crdFile}, ErrorIfCRDPathMissing: true})
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bundle-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for i, ex := range examples {
		u := &unstructured.Unstructured{Object: ex}
		u.SetNamespace(ns.Name)
		if err := c.Create(ctx, u, client.DryRunAll); err != nil {
			t.Errorf("alm-examples[%d] %s/%s: %v", i, u.GetKind(), u.GetName(), err)
		}
	}
	// The same API server rejects a broken example, so the check has teeth.
	bad := &unstructured.Unstructured{Object: examples[0]}
	bad = bad.DeepCopy()
	bad.SetNamespace(ns.Name)
	_ = unstructured.SetNestedField(bad.Object, int64(70000), "spec", "drain", "seconds")
	if err := c.Create(ctx, bad, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.drain.seconds") {
		t.Errorf("dry run of an example with spec.drain.seconds=70000: %v, want a rejection naming the field", err)
	}
}

type (
	rbacClusterRole = rbacv1.ClusterRole
	rbacPolicyRule  = rbacv1.PolicyRule
)

// checkConversionWebhook asserts the conversion webhook of the ServiceRegistry CRD
// (v1alpha1 <-> v1beta1), the second webhook definition: OLM points the CRD at it and injects
// the CA.
func checkConversionWebhook(t *testing.T, hooks []operatorsv1alpha1.WebhookDescription) {
	t.Helper()
	if len(hooks) != 2 {
		return // reported by checkDeployment
	}
	c := hooks[1]
	if c.Type != operatorsv1alpha1.ConversionWebhook || c.DeploymentName != manager || c.TargetPort == nil || c.TargetPort.IntValue() != 9443 ||
		c.WebhookPath == nil || *c.WebhookPath != "/convert" || !slices.Equal(c.ConversionCRDs, []string{"serviceregistries.discovery.registrar.dev"}) {
		t.Errorf("conversion webhook definition %+v", c)
	}
}
