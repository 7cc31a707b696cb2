package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

// TestLocalConfigCompression checks what the API server is asked for: no gzip by default
// (as kube-controller-manager asks), gzip with --kube-api-compression.
func TestLocalConfigCompression(t *testing.T) {
	for _, tc := range []struct {
		compression bool
		want        string
	}{{false, ""}, {true, "gzip"}} {
		got := make(chan string, 1)
		// TLS, as every API server serves: for plain HTTP client-go uses http.DefaultTransport,
		// which ignores DisableCompression.
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- r.Header.Get("Accept-Encoding")
		}))
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		given := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
		hc, err := rest.HTTPClientFor(localConfig(given, tc.compression))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(srv.URL + "/api")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if enc := <-got; enc != tc.want {
			t.Errorf("compression %v: Accept-Encoding %q, want %q", tc.compression, enc, tc.want)
		}
		if given.DisableCompression {
			t.Errorf("compression %v: the given config was modified", tc.compression)
		}
		srv.Close()
	}
}
