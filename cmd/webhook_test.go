package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/certs"
	podwebhook "github.com/registrar-dev/registrar/internal/webhook"
)

func TestWebhookFlags(t *testing.T) {
	c, _, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := webhookConfig{enabled: true, port: 9443, certDir: "/tmp/k8s-webhook-server/serving-certs"}
	if c.webhook != want {
		t.Errorf("defaults = %+v, want %+v", c.webhook, want)
	}
	c, _, err = parseFlags([]string{"--enable-webhook=false", "--webhook-port=10443", "--webhook-cert-dir=/certs", "--webhook-self-signed-hosts=localhost,127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	want = webhookConfig{enabled: false, port: 10443, certDir: "/certs", selfSignedHosts: "localhost,127.0.0.1"}
	if c.webhook != want {
		t.Errorf("parsed = %+v, want %+v", c.webhook, want)
	}
}

// registered builds a manager (never started) whose webhook server uses a mux we can
// inspect, runs setupWebhook and reports whether the pod webhook was registered.
func registered(t *testing.T, c webhookConfig) (bool, error) {
	t.Helper()
	mux := http.NewServeMux()
	mgr, err := ctrl.NewManager(&rest.Config{Host: "http://127.0.0.1:1"}, ctrl.Options{
		Scheme: newScheme(),
		// No API server here: the cache indexes (internal/claimindex) need the kinds mapped.
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
			m := meta.NewDefaultRESTMapper(nil)
			m.Add(v1beta1.GroupVersion.WithKind("ServiceRegistry"), meta.RESTScopeNamespace)
			m.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
			return m, nil
		},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Port: c.port, CertDir: c.certDir, WebhookMux: mux}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setupWebhook(mgr, c, nil); err != nil {
		return false, err
	}
	_, pattern := mux.Handler(httptest.NewRequest(http.MethodPost, podwebhook.Path, nil))
	return pattern == podwebhook.Path, nil
}

func TestSetupWebhook(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		if ok, err := registered(t, webhookConfig{enabled: false, certDir: t.TempDir()}); ok || err != nil {
			t.Errorf("registered=%v err=%v, want neither", ok, err)
		}
	})
	t.Run("no certificate and no self-signed hosts: not served, no error", func(t *testing.T) {
		if ok, err := registered(t, webhookConfig{enabled: true, certDir: filepath.Join(t.TempDir(), "none")}); ok || err != nil {
			t.Errorf("registered=%v err=%v, want neither", ok, err)
		}
	})
	t.Run("self-signed hosts: certificate generated and webhook served", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "certs")
		ok, err := registered(t, webhookConfig{enabled: true, certDir: dir, selfSignedHosts: "localhost, 127.0.0.1"})
		if !ok || err != nil {
			t.Fatalf("registered=%v err=%v, want registered", ok, err)
		}
		for _, f := range []string{certs.CertFile, certs.KeyFile, certs.CAFile} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	})
	t.Run("mounted certificate: webhook served", func(t *testing.T) {
		dir := t.TempDir()
		b, err := certs.Generate([]string{"registrar-webhook-service.registrar-system.svc"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(dir, certs.CertFile), b.Cert, 0o644)
		_ = os.WriteFile(filepath.Join(dir, certs.KeyFile), b.Key, 0o600)
		if ok, err := registered(t, webhookConfig{enabled: true, certDir: dir}); !ok || err != nil {
			t.Errorf("registered=%v err=%v, want registered", ok, err)
		}
	})
	t.Run("self-signed hosts over a foreign unusable certificate: error", func(t *testing.T) {
		dir := t.TempDir()
		_ = os.WriteFile(filepath.Join(dir, certs.CertFile), []byte("garbage"), 0o644)
		if _, err := registered(t, webhookConfig{enabled: true, certDir: dir, selfSignedHosts: "localhost"}); err == nil {
			t.Errorf("want an error")
		}
	})
}
