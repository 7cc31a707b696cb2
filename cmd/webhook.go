package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/certs"
	podwebhook "github.com/registrar-dev/registrar/internal/webhook"
)

// webhookConfig is what the webhook flags set.
type webhookConfig struct {
	enabled          bool
	port             int
	certDir          string
	selfSignedHosts  string
	selfSignedSecret string
	caInjectName     string
	caInjectCRD      string
}

func bindWebhookFlags(fs *flag.FlagSet, c *webhookConfig) {
	fs.BoolVar(&c.enabled, "enable-webhook", true, "Serve the pod mutating webhook (readiness gate and preStop drain injection) and the ServiceRegistry CRD's conversion webhook (v1alpha1 <-> v1beta1).")
	fs.IntVar(&c.port, "webhook-port", 9443, "Port the webhook server listens on.")
	fs.StringVar(&c.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory holding the webhook's tls.crt and tls.key (a mounted cert-manager Secret in a cluster).")
	fs.StringVar(&c.caInjectName, "webhook-ca-inject", "", "Name of a MutatingWebhookConfiguration whose caBundle the manager sets to its self-signed CA (installs without cert-manager; one replica).")
	fs.StringVar(&c.caInjectCRD, "webhook-ca-inject-crd", "", "Name of a CustomResourceDefinition whose conversion webhook's caBundle the manager sets to its self-signed CA, like --webhook-ca-inject (serviceregistries.discovery.registrar.dev).")
	fs.StringVar(&c.selfSignedHosts, "webhook-self-signed-hosts", "", "Comma-separated DNS names and IPs; when set and --webhook-cert-dir has no usable certificate, generate a self-signed CA (ca.crt) and serving certificate there (for local runs).")
	fs.StringVar(&c.selfSignedSecret, "webhook-self-signed-secret", "", "Name of a Secret in the manager's namespace (created empty by the install) that keeps the certificate of --webhook-self-signed-hosts: "+
		"the manager generates it there once and every replica, and the next version during an upgrade, serves with the same CA; "+
		"empty: each replica generates its own (one replica only).")
}

// newWebhookServer is the manager's webhook server. It only listens once something is
// registered on it (setupWebhook), so passing it while the webhook is disabled costs nothing.
func newWebhookServer(c webhookConfig) webhook.Server {
	return &webhookServer{Server: webhook.NewServer(webhook.Options{Port: c.port, CertDir: c.certDir})}
}

// webhookServer is controller-runtime's webhook server plus what starts with it: the
// self-signed CA injector (caInjector). The manager starts its webhook servers before its
// caches, and those wait for it: listing ServiceRegistries as v1beta1 goes through the
// conversion webhook, which the API server calls only once the CRD trusts the CA. A
// runnable added with mgr.Add would start after the caches, never.
type webhookServer struct {
	webhook.Server
	alongside []func(context.Context)
}

// Start runs the alongside functions, each in a goroutine of its own, and the server.
func (s *webhookServer) Start(ctx context.Context) error {
	for _, f := range s.alongside {
		go f(ctx)
	}
	return s.Server.Start(ctx)
}

// setupWebhook registers the pod webhook on the manager, after making sure a serving
// certificate exists: generated when --webhook-self-signed-hosts is set, otherwise expected
// in --webhook-cert-dir. Without one the webhook is not served (pods are admitted unchanged
// anyway, since its failurePolicy is Ignore) and the reason is logged, so a local run without
// certificates still starts.
func setupWebhook(mgr ctrl.Manager, c webhookConfig, rec events.EventRecorder) error {
	log := setupLog.WithName("webhook")
	if !c.enabled {
		log.Info("pod webhook disabled (--enable-webhook=false)")
		return nil
	}
	if hosts := certs.ParseHosts(c.selfSignedHosts); len(hosts) > 0 {
		var generated bool
		var err error
		if c.selfSignedSecret != "" {
			cl, cerr := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
			if cerr != nil {
				return fmt.Errorf("webhook certificate: client: %w", cerr)
			}
			generated, err = selfSignedFromSecret(cl, c, hosts)
		} else {
			generated, err = certs.Ensure(c.certDir, hosts)
		}
		if err != nil {
			return fmt.Errorf("webhook certificate: %w", err)
		}
		log.Info("self-signed webhook certificate ready", "dir", c.certDir, "hosts", hosts, "generated", generated,
			"caBundle", filepath.Join(c.certDir, certs.CAFile))
		if c.caInjectName != "" || c.caInjectCRD != "" {
			srv, ok := mgr.GetWebhookServer().(*webhookServer)
			if !ok {
				return fmt.Errorf("add caBundle injector: the manager's webhook server is a %T, not newWebhookServer's", mgr.GetWebhookServer())
			}
			srv.alongside = append(srv.alongside, caInjector(mgr, c))
		}
	}
	for _, f := range []string{certs.CertFile, certs.KeyFile} {
		if _, err := os.Stat(filepath.Join(c.certDir, f)); errors.Is(err, fs.ErrNotExist) {
			log.Info("pod webhook NOT served: no serving certificate; mount one (config/default uses cert-manager) or pass "+
				"--webhook-self-signed-hosts for a local run, or --enable-webhook=false to silence this",
				"missing", filepath.Join(c.certDir, f))
			return nil
		} else if err != nil {
			return fmt.Errorf("webhook certificate: %w", err)
		}
	}
	if err := podwebhook.Register(mgr, rec); err != nil {
		return fmt.Errorf("register the pod webhook: %w", err)
	}
	// The CRD's conversion webhook (/convert): the API server converts ServiceRegistries
	// between v1alpha1 and v1beta1 (the hub, stored) through it.
	if err := ctrl.NewWebhookManagedBy(mgr, &v1beta1.ServiceRegistry{}).Complete(); err != nil {
		return fmt.Errorf("register the ServiceRegistry conversion webhook: %w", err)
	}
	// Ready only once the webhook server listens, so the Service sends reviews to serving pods.
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("add webhook ready check: %w", err)
	}
	log.Info("pod and conversion webhooks registered", "paths", []string{podwebhook.Path, "/convert"}, "port", c.port, "certDir", c.certDir)
	return nil
}

// caInjector writes the self-signed CA into the webhook configuration and the CRD's
// conversion webhook when the webhook server starts, retrying with backoff until it
// succeeds (they may be applied after the manager) or ctx ends. It runs on every replica,
// not only the leader: the webhooks are served by all.
func caInjector(mgr ctrl.Manager, c webhookConfig) func(context.Context) {
	return func(ctx context.Context) {
		ca, err := os.ReadFile(filepath.Join(c.certDir, certs.CAFile))
		if err != nil {
			setupLog.Error(err, "webhook caBundle not set: cannot read the self-signed CA")
			return
		}
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: time.Minute}
		injected := map[string]bool{}
		_ = wait.ExponentialBackoffWithContext(ctx, backoff, // ends only when it succeeded or the manager stops
			func(ctx context.Context) (bool, error) {
				done := true
				for _, t := range []struct {
					kind, name string
					inject     func(context.Context, client.Reader, client.Writer, string, []byte) error
				}{
					{"MutatingWebhookConfiguration", c.caInjectName, podwebhook.InjectCABundle},
					{"CustomResourceDefinition", c.caInjectCRD, podwebhook.InjectCRDCABundle},
				} {
					if t.name == "" || injected[t.kind] {
						continue
					}
					if err := t.inject(ctx, mgr.GetAPIReader(), mgr.GetClient(), t.name, ca); err != nil {
						setupLog.Info("webhook caBundle not set yet; retrying", "kind", t.kind, "name", t.name, "error", err.Error())
						done = false
						continue
					}
					injected[t.kind] = true
					setupLog.Info("webhook caBundle set", "kind", t.kind, "name", t.name)
				}
				return done, nil
			})
	}
}
