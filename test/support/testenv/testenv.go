// Package testenv starts the envtest environment registrar's suites share: a real
// kube-apiserver and etcd (KUBEBUILDER_ASSETS, built by hack/envtest-assets.sh) with the
// CRDs of config/crd/bases and, on request, the webhook configuration of config/webhook.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/test/support/proc"
)

// Options choose what the environment installs.
type Options struct {
	// Webhooks installs config/webhook, pointed by envtest at a local serving address with
	// its own CA (Env.WebhookInstallOptions says where to serve).
	Webhooks bool
	// CRDs is the directory of the CRDs to install; config/crd/bases of the repository when
	// empty.
	CRDs string
}

// Env is a running environment.
type Env struct {
	*envtest.Environment
	// Config reaches the API server as an admin; Client is an uncached client with Scheme.
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
}

// NewScheme is client-go's scheme plus registrar's API.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1beta1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts the environment. It fails with a hint when KUBEBUILDER_ASSETS is not set.
func Start(opts Options) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the suite with `make test`, which builds the assets, " +
			"or set it to bin/k8s/<version> (make envtest-assets)")
	}
	root, err := proc.RepoRoot()
	if err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	crds := opts.CRDs
	if crds == "" {
		crds = filepath.Join(root, "config", "crd", "bases")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{crds},
		ErrorIfCRDPathMissing: true,
	}
	if opts.Webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Environment: env, Config: cfg, Client: c, Scheme: scheme}, nil
}

// WriteAdminKubeconfig adds a system:masters user and writes its kubeconfig to path, for
// processes (the operator, kube-controller-manager) that run outside the test binary.
func (e *Env) WriteAdminKubeconfig(user, path string) error {
	u, err := e.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add user %s: %w", user, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return err
	}
	// Written aside and renamed: a process polling for the file never reads half of it.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, kc, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
