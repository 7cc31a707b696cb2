package discovery_test

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/netproxy"
)

// etcdEndpoint is the client URL of the etcd process shared by the tests (tests that stop a
// store start their own), used by the examples too.
var etcdEndpoint string

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, func(s *etcdtest.Server) error { etcdEndpoint = s.Endpoint(); return nil }))
}

// requireServer fails (never skips) the test when there is no etcd.
func requireServer(t testing.TB) *etcdtest.Server { return etcdtest.Shared(t) }

// storeClient is a separate etcd client the test writes and reads the store with. It
// empties the default prefix first, so every test (and every -count=N run) starts clean.
func storeClient(t testing.TB, srv *etcdtest.Server) *clientv3.Client {
	t.Helper()
	cli, err := srv.Client()
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, discovery.DefaultPrefix+"/", clientv3.WithPrefix()); err != nil {
		t.Fatalf("empty the store: %v", err)
	}
	return cli
}

// endpoint is the value the operator would write for pod in namespace "ns".
func endpoint(service, pod, addr string) map[string]any {
	return map[string]any{
		"service": service, "namespace": "ns", "pod": pod, "uid": "uid-" + pod, "address": addr,
		"ports": map[string]int32{"http": 8080}, "owner": "owner-uid", "registeredAt": "2026-11-29T18:00:00Z",
	}
}

func key(service, pod string) string { return path.Join(discovery.DefaultPrefix, service, "ns", pod) }

func put(t testing.TB, cli *clientv3.Client, service, pod, addr string) {
	t.Helper()
	value, err := json.Marshal(endpoint(service, pod, addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key(service, pod), string(value)); err != nil {
		t.Fatalf("put %s: %v", pod, err)
	}
}

func del(t testing.TB, cli *clientv3.Client, service, pod string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, key(service, pod)); err != nil {
		t.Fatalf("delete %s: %v", pod, err)
	}
}

// newClient starts a discovery client with test-sized timers and closes it at cleanup.
func newClient(t testing.TB, cfg discovery.Config) *discovery.Client {
	t.Helper()
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = 200 * time.Millisecond
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = 3 * time.Second // generous: a busy machine must not look like an outage
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase, cfg.BackoffMax = 100*time.Millisecond, time.Second
	}
	c, err := discovery.New(cfg)
	if err != nil {
		t.Fatalf("discovery.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitSynced(t testing.TB, c *discovery.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
}

// pods is the pod names of the client's list, in its order.
func pods(c *discovery.Client) []string {
	var out []string
	for _, inst := range c.All() {
		out = append(out, inst.Pod)
	}
	return out
}

// proxy is a TCP proxy between a client and etcd that the test can cut (a partition of
// that client only: etcd keeps serving everyone else).
type proxy struct{ *netproxy.Proxy }

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	p, err := netproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &proxy{p}
}

// URL is the proxy's client URL.
func (p *proxy) URL() string { return "http://" + p.Addr }

// Block cuts every connection and refuses new ones until Unblock.
func (p *proxy) Block() { p.Cut() }

// Unblock lets connections through again.
func (p *proxy) Unblock() { p.Restore() }
