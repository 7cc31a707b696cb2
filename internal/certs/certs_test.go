package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range []string{CertFile, KeyFile, CAFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		out[f] = b
	}
	return out
}

func mustParse(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCert(p)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return c
}

func TestEnsureGeneratesUsableFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "serving-certs")
	hosts := []string{"localhost", "registrar-webhook-service.registrar-system.svc", "127.0.0.1", "::1"}
	now := time.Now()
	gen, err := ensureAt(dir, hosts, now)
	if err != nil || !gen {
		t.Fatalf("ensure = %v, %v; want generated", gen, err)
	}
	files := readAll(t, dir)
	if st, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("tls.key mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}

	ca := mustParse(t, files[CAFile])
	leaf := mustParse(t, files[CertFile])
	if !ca.IsCA || ca.Subject.CommonName != caCommonName {
		t.Errorf("CA: IsCA=%v CN=%q", ca.IsCA, ca.Subject.CommonName)
	}
	for _, c := range []*x509.Certificate{ca, leaf} {
		pub, ok := c.PublicKey.(*ecdsa.PublicKey)
		if !ok || pub.Curve != elliptic.P256() {
			t.Errorf("%s: key is %T, want ECDSA P-256", c.Subject.CommonName, c.PublicKey)
		}
		if d := c.NotAfter.Sub(now); d < Validity-time.Minute || d > Validity+time.Minute {
			t.Errorf("%s: valid for %v after now, want ~1 year", c.Subject.CommonName, d)
		}
	}
	if !reflect.DeepEqual(leaf.DNSNames, []string{"localhost", "registrar-webhook-service.registrar-system.svc"}) || len(leaf.IPAddresses) != 2 {
		t.Errorf("SANs: DNS %v IP %v", leaf.DNSNames, leaf.IPAddresses)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(files[CAFile])
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: pool}); err != nil {
			t.Errorf("verify for %s: %v", h, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: pool}); err == nil {
		t.Errorf("certificate verifies for a host it was not made for")
	}

	// A real TLS handshake with the files, trusting only ca.crt.
	pair, err := tls.X509KeyPair(files[CertFile], files[KeyFile])
	if err != nil {
		t.Fatalf("key pair: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()
	cli := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := cli.Get(srv.URL) // https://127.0.0.1:port
	if err != nil {
		t.Fatalf("TLS request: %v", err)
	}
	_ = resp.Body.Close()
}

func TestEnsureReusesValidFiles(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"localhost", "127.0.0.1"}
	now := time.Now()
	if _, err := ensureAt(dir, hosts, now); err != nil {
		t.Fatal(err)
	}
	before := readAll(t, dir)
	for _, sub := range [][]string{hosts, {"127.0.0.1"}, {"localhost"}} { // a subset is covered too
		gen, err := ensureAt(dir, sub, now.Add(300*24*time.Hour))
		if err != nil || gen {
			t.Fatalf("ensure(%v) = %v, %v; want reuse", sub, gen, err)
		}
	}
	if after := readAll(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("files changed on reuse")
	}
}

func TestEnsureReplacesItsOwnStaleFiles(t *testing.T) {
	tests := []struct {
		name  string
		hosts []string
		at    time.Duration // when the second Ensure runs, after the first
		mess  func(dir string)
	}{
		{name: "expiring within RenewBefore", hosts: []string{"localhost"}, at: Validity - RenewBefore + time.Hour},
		{name: "expired", hosts: []string{"localhost"}, at: 2 * Validity},
		{name: "new host", hosts: []string{"localhost", "10.0.0.7"}},
		{name: "ca.crt missing", hosts: []string{"localhost"}, mess: func(dir string) { _ = os.Remove(filepath.Join(dir, CAFile)) }},
		{name: "tls.key missing", hosts: []string{"localhost"}, mess: func(dir string) { _ = os.Remove(filepath.Join(dir, KeyFile)) }},
		{name: "key of another pair", hosts: []string{"localhost"}, mess: func(dir string) {
			b, _ := Generate([]string{"localhost"}, time.Now())
			_ = os.WriteFile(filepath.Join(dir, KeyFile), b.Key, 0o600)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			now := time.Now()
			if _, err := ensureAt(dir, []string{"localhost"}, now); err != nil {
				t.Fatal(err)
			}
			if tt.mess != nil {
				tt.mess(dir)
			}
			later := now.Add(tt.at)
			gen, err := ensureAt(dir, tt.hosts, later)
			if err != nil || !gen {
				t.Fatalf("ensure = %v, %v; want regenerated", gen, err)
			}
			if problem, _, err := check(dir, tt.hosts, later); problem != "" || err != nil {
				t.Errorf("after regeneration: %q, %v", problem, err)
			}
		})
	}
}

// foreign writes a certificate for hosts that another CA issued (as cert-manager would).
func foreign(t *testing.T, dir string, hosts []string, notAfter time.Time) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "someone else's"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	_ = os.WriteFile(filepath.Join(dir, CertFile), crt, 0o644)
	_ = os.WriteFile(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	_ = os.WriteFile(filepath.Join(dir, CAFile), crt, 0o644)
}

func TestEnsureNeverReplacesForeignFiles(t *testing.T) {
	t.Run("usable foreign certificate is reused", func(t *testing.T) {
		dir := t.TempDir()
		foreign(t, dir, []string{"localhost"}, time.Now().Add(Validity))
		before := readAll(t, dir)
		gen, err := Ensure(dir, []string{"localhost"})
		if err != nil || gen {
			t.Fatalf("ensure = %v, %v; want reuse", gen, err)
		}
		if !reflect.DeepEqual(before, readAll(t, dir)) {
			t.Errorf("foreign files changed")
		}
	})
	t.Run("unusable foreign certificate is an error, files untouched", func(t *testing.T) {
		dir := t.TempDir()
		foreign(t, dir, []string{"example.com"}, time.Now().Add(Validity))
		before := readAll(t, dir)
		gen, err := Ensure(dir, []string{"localhost"})
		if err == nil || gen || !strings.Contains(err.Error(), "did not generate") || !strings.Contains(err.Error(), "does not cover localhost") {
			t.Fatalf("ensure = %v, %v; want an error naming the problem", gen, err)
		}
		if !reflect.DeepEqual(before, readAll(t, dir)) {
			t.Errorf("foreign files changed")
		}
	})
	t.Run("garbage tls.crt is an error", func(t *testing.T) {
		dir := t.TempDir()
		_ = os.WriteFile(filepath.Join(dir, CertFile), []byte("not a cert"), 0o644)
		if _, err := Ensure(dir, []string{"localhost"}); err == nil {
			t.Fatal("want an error")
		}
		if b, _ := os.ReadFile(filepath.Join(dir, CertFile)); !bytes.Equal(b, []byte("not a cert")) {
			t.Errorf("tls.crt replaced")
		}
	})
}

func TestHosts(t *testing.T) {
	if got := ParseHosts(" localhost, ,127.0.0.1,"); !reflect.DeepEqual(got, []string{"localhost", "127.0.0.1"}) {
		t.Errorf("ParseHosts = %q", got)
	}
	if ParseHosts("") != nil {
		t.Errorf("ParseHosts(\"\") not empty")
	}
	if _, err := Ensure(t.TempDir(), nil); err == nil {
		t.Errorf("Ensure without hosts: no error")
	}
	if _, err := Generate(nil, time.Now()); err == nil {
		t.Errorf("Generate without hosts: no error")
	}
}
