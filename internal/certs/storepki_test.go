package certs

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var storeHosts = []string{"*.registrar-etcd.ns.svc", "registrar-etcd.ns.svc", "localhost", "127.0.0.1"}

// TestStorePKIOverTLS: a server presenting the member certificate and requiring client
// certificates of the CA accepts registrar's client certificate and a member's (peers), for
// a member's name under the wildcard, and refuses a client without a certificate.
func TestStorePKIOverTLS(t *testing.T) {
	p, err := GenerateStorePKI(storeHosts, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CACert) {
		t.Fatal("no CA")
	}
	member, err := tls.X509KeyPair(p.MemberCert, p.MemberKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := tls.X509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{member}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	get := func(serverName string, certs ...tls.Certificate) (string, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, ServerName: serverName, Certificates: certs, MinVersion: tls.VersionTLS12}}}
		resp, err := c.Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if cn, err := get("registrar-etcd-1.registrar-etcd.ns.svc", client); err != nil || cn != StoreClientCommonName {
		t.Errorf("registrar's client certificate: %q, %v", cn, err)
	}
	if _, err := get("registrar-etcd.ns.svc", member); err != nil {
		t.Errorf("a member as a peer's client: %v", err)
	}
	if _, err := get("registrar-etcd-1.registrar-etcd.other.svc", client); err == nil {
		t.Error("a name outside the member certificate was accepted")
	}
	if _, err := get("localhost"); err == nil {
		t.Error("a client without a certificate was accepted")
	}
}

func TestCheckStorePKI(t *testing.T) {
	now := time.Now()
	p, err := GenerateStorePKI(storeHosts, now)
	if err != nil {
		t.Fatal(err)
	}
	if problem, ours := CheckStorePKI(p, storeHosts, now); problem != "" || !ours {
		t.Errorf("fresh PKI: problem %q, ours %v", problem, ours)
	}
	if problem, ours := CheckStorePKI(&StorePKI{}, storeHosts, now); problem != "empty" || !ours {
		t.Errorf("empty: problem %q, ours %v", problem, ours)
	}
	if problem, _ := CheckStorePKI(p, []string{"*.registrar-etcd.other.svc"}, now); !strings.Contains(problem, "other hosts") {
		t.Errorf("other hosts: problem %q", problem)
	}
	if problem, ours := CheckStorePKI(p, storeHosts, now.Add(StoreValidity-RenewBefore/2)); !strings.Contains(problem, "expires") || !ours {
		t.Errorf("near expiry: problem %q, ours %v", problem, ours)
	}
	round := StorePKIFromData(p.Data())
	if problem, _ := CheckStorePKI(round, storeHosts, now); problem != "" {
		t.Errorf("through Secret data: %q", problem)
	}
	other, err := GenerateStorePKI(storeHosts, now)
	if err != nil {
		t.Fatal(err)
	}
	mixed := *p
	mixed.ClientCert, mixed.ClientKey = other.ClientCert, other.ClientKey
	if problem, _ := CheckStorePKI(&mixed, storeHosts, now); !strings.Contains(problem, "does not verify") {
		t.Errorf("client certificate of another CA: %q", problem)
	}
	// A CA from elsewhere is not ours to replace.
	dir := t.TempDir()
	foreign(t, dir, []string{"localhost"}, now.Add(Validity))
	theirs := *p
	theirs.CACert = readAll(t, dir)[CAFile]
	if _, ours := CheckStorePKI(&theirs, storeHosts, now); ours {
		t.Error("a foreign CA counted as ours")
	}
}
