package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/internal/certs"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

// TestEnsureWebhookSecret against a real API server: replicas starting at once with the
// Secret the install creates empty end up serving one certificate, the one stored in the
// Secret; a pod started later (the next version during an upgrade) serves that same
// certificate, whatever its certificate directory held; a missing Secret is an error.
func TestEnsureWebhookSecret(t *testing.T) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns, name = "default", "registrar-webhook-self-signed-cert"
	hosts := []string{"registrar-webhook-service.registrar-system.svc", "registrar-webhook-service.registrar-system.svc.cluster.local"}
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque}); err != nil {
		t.Fatal(err)
	}

	const replicas = 4
	dirs := make([]string, replicas)
	errs := make([]error, replicas)
	generated := make([]bool, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		dirs[i] = t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			generated[i], errs[i] = ensureWebhookSecret(ctx, env.Client, ns, name, dirs[i], hosts)
		}()
	}
	wg.Wait()
	sec := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		t.Fatal(err)
	}
	stored := certs.BundleFromData(sec.Data)
	if stored.Empty() {
		t.Fatal("the Secret is still empty")
	}
	wins := 0
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if generated[i] {
			wins++
		}
		requireServes(t, dirs[i], stored, "replica %d", i)
	}
	if wins != 1 {
		t.Errorf("%d replicas stored a certificate, want exactly 1", wins)
	}

	// The next version: a new pod whose directory is empty, and one whose directory holds a
	// certificate it generated itself (a manager without the Secret, or a failed start).
	later := t.TempDir()
	if gen, err := ensureWebhookSecret(ctx, env.Client, ns, name, later, hosts); err != nil || gen {
		t.Fatalf("restart: generated %v, %v; want the stored certificate reused", gen, err)
	}
	requireServes(t, later, stored, "a later pod")
	own := t.TempDir()
	if _, err := certs.Ensure(own, hosts); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureWebhookSecret(ctx, env.Client, ns, name, own, hosts); err != nil {
		t.Fatal(err)
	}
	requireServes(t, own, stored, "a pod with a certificate of its own")

	// Other hosts (e.g. another namespace): a new certificate, stored for the others.
	moved := []string{"registrar-webhook-service.elsewhere.svc"}
	if gen, err := ensureWebhookSecret(ctx, env.Client, ns, name, t.TempDir(), moved); err != nil || !gen {
		t.Fatalf("other hosts: generated %v, %v; want a new certificate", gen, err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(sec.Data[certs.CAFile], stored.CACert) {
		t.Error("the Secret keeps the CA of the old hosts")
	}

	if _, err := ensureWebhookSecret(ctx, env.Client, ns, "missing", t.TempDir(), hosts); err == nil {
		t.Error("no error for a missing Secret")
	}
}

func requireServes(t *testing.T, dir string, want *certs.Bundle, format string, args ...any) {
	t.Helper()
	for _, f := range []struct {
		name string
		want []byte
	}{{certs.CAFile, want.CACert}, {certs.CertFile, want.Cert}, {certs.KeyFile, want.Key}} {
		got, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil || !bytes.Equal(got, f.want) {
			t.Errorf(format+": %s is not the Secret's (%v)", append(args, f.name, err)...)
		}
	}
}
