package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/ports"
)

var etcdSrv *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, func(s *etcdtest.Server) error { etcdSrv = s; return nil }))
}

// TestRun starts the server as main does against a real etcd: /readyz turns ready after the
// first listing, the API answers, /metrics has the registrar_eureka_ metrics, a client that
// never finishes its headers is cut off after --read-header-timeout, and SIGTERM (ctx) stops
// it.
func TestRun(t *testing.T) {
	etcdtest.Shared(t)
	api, err := ports.FreeLoopback()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr, err := ports.FreeLoopback()
	if err != nil {
		t.Fatal(err)
	}
	var o options
	o.bind(flagSet())
	o.storeEndpoints, o.prefix, o.listen, o.metricsListen = etcdSrv.Endpoint(), "/registrar-run-test", api, metricsAddr
	o.readHeaderTimeout = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, logr.Discard()) }()

	get := func(url string, accept string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, _ := get("http://"+metricsAddr+"/readyz", ""); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := get("http://"+api+"/eureka/apps", "application/json"); code != http.StatusOK || !strings.Contains(body, `"applications"`) {
		t.Errorf("/eureka/apps: %d %s", code, body)
	}
	if code, body := get("http://"+metricsAddr+"/metrics", ""); code != http.StatusOK ||
		!strings.Contains(body, "registrar_eureka_requests_total") || !strings.Contains(body, "registrar_eureka_ready 1") {
		t.Errorf("/metrics: %d, registrar_eureka_ metrics missing", code)
	}

	// A slow client: half a request line, then nothing. The server closes the connection.
	conn, err := net.DialTimeout("tcp", api, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /eureka/apps HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.ReadAll(conn) // returns when the server closes
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("a client that never finished its headers held the connection %s", waited)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop")
	}
}
