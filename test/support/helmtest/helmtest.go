// Package helmtest holds what the Helm chart's tests share (test/helm, test/e2e/install,
// test/manifests): the pinned helm CLI, and a bare envtest kube-apiserver with an admin
// kubeconfig for the processes (helm) that run outside the test binary.
package helmtest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/registrar-dev/registrar/test/support/proc"
)

// Bin is $HELM_BIN (make test sets it), else the newest bin/helm-v* of the repository.
func Bin(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("HELM_BIN"); b != "" {
		return b
	}
	root, err := proc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(root, "bin", "helm-v*"))
	if len(matches) == 0 {
		t.Fatal("no helm CLI: run `make test` or `make test-chart` (they build bin/helm-<version>), or set HELM_BIN")
	}
	slices.Sort(matches)
	return matches[len(matches)-1]
}

// StartAPIServer starts env (kube-apiserver and etcd from KUBEBUILDER_ASSETS, with what the
// caller configured in env) and stops it when the test ends.
func StartAPIServer(t testing.TB, env *envtest.Environment) *rest.Config {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test` (or `make test-chart`), which builds kube-apiserver and etcd")
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return cfg
}

// AdminKubeconfig adds a system:masters user to the running env and returns the path of its
// kubeconfig, in the test's temporary directory.
func AdminKubeconfig(t testing.TB, env *envtest.Environment) string {
	t.Helper()
	admin, err := env.AddUser(envtest.User{Name: "helm-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
