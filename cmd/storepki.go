package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/internal/certs"
)

// storePKIConfig is what the --store-self-signed-* flags set: a self-signed PKI for the etcd
// the install bundles (config/components/etcd, the chart's etcd.enabled), kept in a Secret
// that the etcd members mount and from which the manager takes its client certificate.
type storePKIConfig struct {
	secret string
	hosts  string
	owner  string
	dir    string
}

func bindStorePKIFlags(fs *flag.FlagSet, c *storePKIConfig) {
	fs.StringVar(&c.secret, "store-self-signed-secret", "", "Name of a Secret in the manager's namespace holding a self-signed PKI for the bundled etcd: ca.crt, the members' tls.crt/tls.key, registrar's client.crt/client.key. "+
		"Created (or filled in) when missing, replaced when it expires within 30 days or names other hosts; "+
		"the manager then uses its client certificate as --store-ca-file, --store-cert-file and --store-key-file (which must be unset).")
	fs.StringVar(&c.hosts, "store-self-signed-hosts", "", "Comma-separated DNS names (\"*.\" wildcards allowed) and IPs the members' certificate of --store-self-signed-secret names.")
	fs.StringVar(&c.owner, "store-self-signed-owner", "", "Deployment in the manager's namespace made the owner of a Secret the manager creates for --store-self-signed-secret, so that deleting it deletes the Secret (not needed when the install creates the Secret empty, as config/components/etcd and the chart do).")
	fs.StringVar(&c.dir, "store-self-signed-dir", "/tmp/registrar-store-tls", "Where the manager writes the CA and its client certificate of --store-self-signed-secret (an emptyDir in a cluster).")
}

func (c storePKIConfig) validate(cfg *config) error {
	if c.secret == "" {
		return nil
	}
	if cfg.storeCA != "" || cfg.storeCert != "" || cfg.storeKey != "" {
		return errors.New("--store-self-signed-secret sets the store's TLS files itself: leave --store-ca-file, --store-cert-file and --store-key-file unset")
	}
	if cfg.storeEndpoints == "" {
		return errors.New("--store-self-signed-secret needs --store-endpoints (the bundled etcd's members)")
	}
	if len(certs.ParseHosts(c.hosts)) == 0 {
		return errors.New("--store-self-signed-secret needs --store-self-signed-hosts (the names the members' certificate covers)")
	}
	return nil
}

// apply makes sure the Secret holds a usable PKI, writes the CA and the client certificate
// into c.dir and points cfg's store TLS files at them.
func (c storePKIConfig) apply(ctx context.Context, restCfg *rest.Config, namespace string, cfg *config) error {
	if c.secret == "" {
		return nil
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("store PKI: %w", err)
	}
	cl, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("store PKI: client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pki, err := ensureStorePKI(ctx, cl, namespace, c.secret, c.owner, certs.ParseHosts(c.hosts), time.Now)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("store PKI: %w", err)
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
		into *string
	}{
		{certs.StoreCAKey, pki.CACert, 0o644, &cfg.storeCA},
		{certs.StoreClientCertKey, pki.ClientCert, 0o644, &cfg.storeCert},
		{certs.StoreClientKeyKey, pki.ClientKey, 0o600, &cfg.storeKey},
	}
	for _, f := range files {
		p := filepath.Join(c.dir, f.name)
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return fmt.Errorf("store PKI: %w", err)
		}
		*f.into = p
	}
	return nil
}

// ensureStorePKI returns the PKI in Secret namespace/name, generating it when the Secret is
// missing, empty, or holds a PKI generated here that is no longer usable for hosts. Several
// replicas starting at once agree on one: creates and updates are conditional, and the loser
// reads what the winner wrote. A Secret holding another PKI that is unusable is an error.
func ensureStorePKI(ctx context.Context, cl client.Client, namespace, name, owner string, hosts []string, now func() time.Time) (*certs.StorePKI, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			return nil, fmt.Errorf("store PKI: Secret %s: still conflicting after %d attempts", key, attempt)
		}
		sec := &corev1.Secret{}
		err := cl.Get(ctx, key, sec)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("store PKI: get Secret %s: %w", key, err)
		}
		exists := err == nil
		if exists {
			p := certs.StorePKIFromData(sec.Data)
			problem, ours := certs.CheckStorePKI(p, hosts, now())
			if problem == "" {
				setupLog.Info("store PKI ready", "secret", key.String())
				return p, nil
			}
			if !ours {
				return nil, fmt.Errorf("store PKI: Secret %s holds a PKI registrar did not generate, and it is not usable (%s); "+
					"fix it or remove --store-self-signed-secret", key, problem)
			}
			setupLog.Info("store PKI: generating a new one", "secret", key.String(), "reason", problem)
		}
		p, err := certs.GenerateStorePKI(hosts, now())
		if err != nil {
			return nil, err
		}
		if !exists {
			sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
				Labels: map[string]string{"app.kubernetes.io/name": "registrar", "app.kubernetes.io/component": "store-pki"}}}
		}
		sec.Type = corev1.SecretTypeOpaque
		sec.Data = p.Data()
		if owner != "" && len(sec.OwnerReferences) == 0 {
			d := &appsv1.Deployment{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: owner}, d); err != nil {
				return nil, fmt.Errorf("store PKI: owner Deployment %s/%s: %w", namespace, owner, err)
			}
			sec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}}
		}
		if exists {
			err = cl.Update(ctx, sec) // conditional on the resourceVersion read above
		} else {
			err = cl.Create(ctx, sec)
		}
		switch {
		case err == nil:
			setupLog.Info("store PKI written", "secret", key.String(), "hosts", hosts, "validUntil", now().Add(certs.StoreValidity).UTC().Format(time.RFC3339))
			return p, nil
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			continue // another replica wrote first: use its PKI
		default:
			return nil, fmt.Errorf("store PKI: write Secret %s: %w", key, err)
		}
	}
}

// podNamespace is the namespace the manager runs in: $POD_NAMESPACE, else its service
// account's, else "default".
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(ns) > 0 {
		return strings.TrimSpace(string(ns))
	}
	return "default"
}
