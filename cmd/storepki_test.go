package main

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/internal/certs"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

// TestEnsureStorePKI against a real API server: the Secret the install creates empty is
// filled once, however many replicas start at the same time; a restart reuses it; a change
// of the hosts replaces it; a Secret holding someone else's unusable PKI is an error.
func TestEnsureStorePKI(t *testing.T) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns, name = "default", "registrar-etcd-tls"
	hosts := []string{"*.registrar-etcd.default.svc", "localhost"}
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque}); err != nil {
		t.Fatal(err)
	}

	const replicas = 4
	got := make([]*certs.StorePKI, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = ensureStorePKI(ctx, env.Client, ns, name, "", hosts, time.Now)
		}()
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if string(got[i].CACert) != string(got[0].CACert) {
			t.Errorf("replica %d has another CA than replica 0", i)
		}
	}
	sec := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data[certs.StoreCAKey]) != string(got[0].CACert) || len(sec.Data[certs.StoreClientKeyKey]) == 0 {
		t.Errorf("the Secret does not hold the PKI the replicas use: keys %v", keys(sec.Data))
	}

	again, err := ensureStorePKI(ctx, env.Client, ns, name, "", hosts, time.Now)
	if err != nil || string(again.CACert) != string(got[0].CACert) {
		t.Errorf("restart: %v, same CA %v", err, err == nil && string(again.CACert) == string(got[0].CACert))
	}
	moved, err := ensureStorePKI(ctx, env.Client, ns, name, "", []string{"*.registrar-etcd.elsewhere.svc"}, time.Now)
	if err != nil || string(moved.CACert) == string(got[0].CACert) {
		t.Errorf("other hosts: %v, new CA %v", err, err == nil && string(moved.CACert) != string(got[0].CACert))
	}

	other, err := certs.GenerateStorePKI([]string{"etcd.example"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bad := other.Data()
	bad[certs.StoreCAKey] = []byte("-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n")
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}, Data: bad}); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureStorePKI(ctx, env.Client, ns, "theirs", "", hosts, time.Now); err == nil {
		t.Error("a Secret with an unusable PKI of unknown origin was replaced")
	}
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
