package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/registrar-dev/registrar/internal/certs"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/ports"
)

// TestRunTLS: with --tls-cert-file and --tls-key-file the Eureka API answers over TLS only.
func TestRunTLS(t *testing.T) {
	etcdtest.Shared(t)
	dir := t.TempDir()
	if _, err := certs.Ensure(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	api, err := ports.FreeLoopback()
	if err != nil {
		t.Fatal(err)
	}
	var o options
	o.bind(flagSet())
	o.storeEndpoints, o.prefix, o.listen, o.metricsListen = etcdSrv.Endpoint(), "/registrar-tls-test", api, ""
	o.tlsCert, o.tlsKey = filepath.Join(dir, certs.CertFile), filepath.Join(dir, certs.KeyFile)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, logr.Discard()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	ca, err := os.ReadFile(filepath.Join(dir, certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, "https://"+api+"/eureka/apps", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"applications"`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer over TLS: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + api + "/eureka/apps"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered 200 on the TLS port")
		}
	}
}
