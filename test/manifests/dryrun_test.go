package manifests

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/registrar-dev/registrar/test/support/helmtest"
)

// TestSelfSignedInstallDryRun sends every object of config/default-selfsigned to a real
// kube-apiserver as a server-side dry run (what `kubectl apply --dry-run=server -f
// dist/install.yaml` does): the API server validates and defaults each one, and stores none.
// config/default needs cert-manager's CRDs, which this API server does not have.
func TestSelfSignedInstallDryRun(t *testing.T) {
	cfg := helmtest.StartAPIServer(t, &envtest.Environment{})
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A dry-run create of a namespaced object needs its namespace to exist.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "default-selfsigned")
	for _, key := range keys(objs) {
		if key == "Namespace/"+ns {
			continue
		}
		m, err := objs[key].Map()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		u := &unstructured.Unstructured{Object: m}
		if err := c.Create(ctx, u, client.DryRunAll); err != nil {
			t.Errorf("server-side dry run of %s: %v", key, err)
		}
	}
}
