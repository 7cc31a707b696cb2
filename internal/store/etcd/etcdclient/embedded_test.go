package etcdclient

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestEmbeddedListensOnLoopbackOnly starts the embedded etcd as cmd/ does by default
// (client and peer URLs on 127.0.0.1; here with kernel-chosen ports) and checks every socket
// it listens on: clients and peers on loopback, and nothing else (no metrics listener).
func TestEmbeddedListensOnLoopbackOnly(t *testing.T) {
	e, err := StartEmbedded(EmbeddedConfig{
		DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0", PeerURL: "http://127.0.0.1:0", StartTimeout: time.Minute,
	})
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done }) //nolint:errcheck // Run's error after cancel is not what this test checks

	var addrs []net.Addr
	for _, l := range e.server.Clients {
		addrs = append(addrs, l.Addr())
	}
	for _, l := range e.server.Peers {
		addrs = append(addrs, l.Addr())
	}
	if len(e.server.Clients) == 0 || len(e.server.Peers) == 0 {
		t.Fatalf("clients %d, peers %d listeners", len(e.server.Clients), len(e.server.Peers))
	}
	for _, a := range addrs {
		tcp, ok := a.(*net.TCPAddr)
		if !ok || !tcp.IP.IsLoopback() {
			t.Errorf("embedded etcd listens on %v, not loopback", a)
		}
	}
	if cfg := e.server.Config(); len(cfg.ListenMetricsUrls) != 0 || len(cfg.ListenClientHttpUrls) != 0 {
		t.Errorf("embedded etcd has extra listeners: metrics %v, client HTTP %v", cfg.ListenMetricsUrls, cfg.ListenClientHttpUrls)
	}
	for _, u := range e.Endpoints() {
		if host, _, err := net.SplitHostPort(u[len("http://"):]); err != nil || !net.ParseIP(host).IsLoopback() {
			t.Errorf("endpoint %s is not on loopback", u)
		}
	}
}
