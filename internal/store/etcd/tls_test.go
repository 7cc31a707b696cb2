package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// TestTLSClientCertificates runs a real etcd with --client-cert-auth and a self-made CA:
// the store works with a client certificate the CA signed, and every other client is refused.
func TestTLSClientCertificates(t *testing.T) {
	requireServer(t) // the same etcd binary; fails (never skips) when it is missing
	srv, err := etcdtest.StartTLS(t.TempDir())
	if err != nil {
		t.Fatalf("start TLS etcd: %v", err)
	}
	t.Cleanup(srv.Stop)
	pki := srv.PKI
	sc := store.Scope{Service: "web", Namespace: "tls"}

	t.Run("client certificate signed by the CA", func(t *testing.T) {
		st := tlsStore(t, etcdclient.Config{Endpoints: []string{srv.Endpoint()},
			CAFile: pki.File("ca.crt"), CertFile: pki.File("client.crt"), KeyFile: pki.File("client.key")})
		e := ep("web-0")
		e.Service, e.Namespace = sc.Service, sc.Namespace
		if _, err := st.Apply(context.Background(), sc, store.Changes{Create: []store.Endpoint{e}}); err != nil {
			t.Fatalf("Apply over TLS: %v", err)
		}
		recs, err := st.List(context.Background(), sc)
		if err != nil || len(recs) != 1 || recs[0].Owner != e.Owner {
			t.Fatalf("List over TLS = %+v, %v", recs, err)
		}
	})

	refused := map[string]etcdclient.Config{
		"no client certificate": {CAFile: pki.File("ca.crt")},
		"client certificate of another CA": {CAFile: pki.File("ca.crt"),
			CertFile: pki.File("other-client.crt"), KeyFile: pki.File("other-client.key")},
		"server not trusted (wrong CA)": {CAFile: pki.File("other-ca.crt"),
			CertFile: pki.File("client.crt"), KeyFile: pki.File("client.key")},
		"server certificate used as a client certificate": {CAFile: pki.File("ca.crt"),
			CertFile: pki.File("server.crt"), KeyFile: pki.File("server.key")},
	}
	for name, cfg := range refused {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each waits for its timeout
			cfg.Endpoints = []string{srv.Endpoint()}
			st := tlsStore(t, cfg)
			if recs, err := st.List(context.Background(), sc); err == nil {
				t.Fatalf("List succeeded with %s: %+v", name, recs)
			}
		})
	}
	t.Run("plain HTTP to the TLS port", func(t *testing.T) {
		t.Parallel()
		st := tlsStore(t, etcdclient.Config{Endpoints: []string{"http" + srv.Endpoint()[len("https"):]}})
		if _, err := st.List(context.Background(), sc); err == nil {
			t.Fatal("List succeeded over plain HTTP")
		}
	})
}

// tlsStore is a Store through a client built like cmd/ builds it, with short timeouts so
// that refused connections fail fast.
func tlsStore(t *testing.T, cfg etcdclient.Config) *etcd.Store {
	t.Helper()
	cfg.DialTimeout = 2 * time.Second
	cli, err := etcdclient.New(cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return etcd.New(cli, etcd.Options{Prefix: "/t/tls", Timeout: 3 * time.Second})
}
