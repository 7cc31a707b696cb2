package helm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const crdName = "serviceregistries.discovery.registrar.dev"

// TestHelmUpgradeFromCRDsDir upgrades a release of the chart as it was before v1beta1 — the
// CRD in crds/, v1alpha1 only, which Helm installs once and never owns — to this chart, whose
// CRD is a template: the upgrade is refused until --take-ownership (docs/install.md,
// "Upgrade"), then brings v1beta1 (stored) and the conversion webhook, and the ServiceRegistry
// written before it is still there.
func TestHelmUpgradeFromCRDsDir(t *testing.T) {
	c, kube := startAPIServerForHelm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	old := oldChart(t)
	if out, err := helm(t, append([]string{"install", release, old, "--namespace", ns, "--create-namespace"}, kube...)...); err != nil {
		t.Fatalf("install the crds/ chart: %v\n%s", err, out)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatalf("CRD from the old chart's crds/: %v", err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1alpha1" {
		t.Fatalf("old chart's CRD versions %+v, want v1alpha1 only", crd.Spec.Versions)
	}
	r := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "discovery.registrar.dev/v1alpha1", "kind": "ServiceRegistry",
		"metadata": map[string]any{"namespace": ns, "name": "orders"},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "orders"}},
			"ports":  []any{map[string]any{"name": "http", "port": int64(8080)}},
			"warmup": map[string]any{"paths": []any{"/warm"}, "timeout": "45s"}},
	}}
	if err := c.Create(ctx, r); err != nil {
		t.Fatalf("create a v1alpha1 ServiceRegistry under the old chart: %v", err)
	}

	// Without --take-ownership Helm refuses to adopt the CRD it did not create as a template.
	up := append([]string{"upgrade", release, chartDir, "--namespace", ns}, kube...)
	if out, err := helm(t, up...); err == nil || !strings.Contains(err.Error(), "invalid ownership metadata") {
		t.Fatalf("upgrade without --take-ownership: err %v, want Helm's \"invalid ownership metadata\"\n%s", err, out)
	}
	if out, err := helm(t, append(up, "--take-ownership")...); err != nil {
		t.Fatalf("upgrade --take-ownership: %v\n%s", err, out)
	}

	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	storage := ""
	for _, v := range crd.Spec.Versions {
		served[v.Name] = v.Served
		if v.Storage {
			storage = v.Name
		}
	}
	if !served["v1alpha1"] || !served["v1beta1"] || storage != "v1beta1" {
		t.Errorf("CRD after the upgrade: served %v, storage %q; want v1alpha1 and v1beta1 served, v1beta1 stored", served, storage)
	}
	if conv := crd.Spec.Conversion; conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter {
		t.Errorf("CRD conversion after the upgrade %+v, want the webhook", crd.Spec.Conversion)
	}
	if a := crd.Annotations; a["meta.helm.sh/release-name"] != release || a["helm.sh/resource-policy"] != "keep" {
		t.Errorf("CRD annotations after the upgrade %v: not the release's, or not kept", a)
	}
	if !slices.Contains(crd.Status.StoredVersions, "v1alpha1") {
		t.Errorf("status.storedVersions %v, want v1alpha1 still listed (objects stored so remain)", crd.Status.StoredVersions)
	}
	// The object written before is still there (read as stored, v1alpha1: no conversion, so
	// no webhook needed in this API server without pods).
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("discovery.registrar.dev/v1alpha1")
	got.SetKind("ServiceRegistry")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, got); err != nil {
		t.Fatalf("the v1alpha1 ServiceRegistry after the upgrade: %v", err)
	}
	if timeout, _, _ := unstructured.NestedString(got.Object, "spec", "warmup", "timeout"); timeout != "45s" {
		t.Errorf("spec.warmup.timeout after the upgrade = %q, want 45s", timeout)
	}
}

// oldChart is charts/registrar as it was before v1beta1: the CRD (v1alpha1 only, no conversion)
// in crds/, no templates/crds.yaml.
func oldChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "registrar")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "templates", "crds.yaml")); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "files", "crds", "discovery.registrar.dev_serviceregistries.yaml")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Conversion = nil
	crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name != "v1alpha1" })
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%s has no v1alpha1", src)
	}
	crd.Spec.Versions[0].Storage, crd.Spec.Versions[0].Deprecated, crd.Spec.Versions[0].DeprecationWarning = true, false, nil
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "crds"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "crds", filepath.Base(src)), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
