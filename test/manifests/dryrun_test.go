package manifests

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestSelfSignedInstallDryRun sends every object of config/default-selfsigned to a real
// kube-apiserver as a server-side dry run (what `kubectl apply --dry-run=server -f
// dist/install.yaml` does): the API server validates and defaults each one, and stores none.
// config/default needs cert-manager's CRDs, which this API server does not have.
func TestSelfSignedInstallDryRun(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds kube-apiserver and etcd")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
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
