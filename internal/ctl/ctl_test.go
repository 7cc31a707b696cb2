package ctl_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/registrar-dev/registrar/internal/ctl"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// server is a fresh etcd seeded once by TestMain, so the revisions in the golden files are
// stable; tests that write use prefixes of their own.
var server *etcdtest.Server

// now is the clock of every run: the seeded instances registered an hour before it.
var now = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(etcdtest.Main(m, func(s *etcdtest.Server) error { server = s; return seed() }))
}

const seedPrefix = "/registrar/services/"

func seed() error {
	cli, err := server.Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	values := []struct{ key, value string }{
		{"orders/shop/orders-a", `{"service":"orders","namespace":"shop","pod":"orders-a","uid":"u-a","address":"10.0.0.1","ports":{"http":8080,"metrics":9090},"node":"node-1","zone":"eu-1a","cluster":"prod","owner":"sreg-uid","registeredAt":"2026-11-29T18:00:00Z"}`},
		{"orders/shop/orders-b", `{"service":"orders","namespace":"shop","pod":"orders-b","uid":"u-b","address":"10.0.0.2","ports":{"http":8080,"metrics":9090},"node":"node-2","zone":"eu-1b","cluster":"prod","owner":"sreg-uid","registeredAt":"2026-11-29T18:59:30Z"}`},
		{"payments/pay/payments-1", `{"service":"payments","namespace":"pay","pod":"payments-1","uid":"u-p","address":"fd00::7","ports":{"grpc":7000},"owner":"sreg-2","registeredAt":"2026-11-26T19:00:00Z"}`},
		{"broken/x/y", `not json`},
		// The operator's own keys and the callers' coordinated breakers (added last, so
		// the endpoints' revisions in the goldens do not move).
		{".registrar/fence/registrar-system", `registrar-7f9c-0`},
		{".registrar/breakers/payments/state", `{"state":"Open","openFor":"10s","by":"orders-7d9f-1","reason":"3 callers reported failure (quorum 3)","at":"2026-11-29T18:59:00Z"}`},
		{".registrar/breakers/payments/probe", `{"caller":"orders-7d9f-2","at":"2026-11-29T18:59:58Z"}`},
		{".registrar/breakers/payments/reports/orders-7d9f-1", `{"caller":"orders-7d9f-1","reason":"failure rate 1.00 >= 0.50 over 10 calls","at":"2026-11-29T18:58:55Z"}`},
		{".registrar/breakers/payments/reports/orders-7d9f-3", `{"caller":"orders-7d9f-3","reason":"slow-call rate 0.90 >= 0.80 over 10 calls","at":"2026-11-29T18:58:58Z"}`},
		{".registrar/breakers/payments/reports/orders-7d9f-4", `{"caller":"orders-7d9f-4","reason":"failure rate 0.60 >= 0.50 over 10 calls","at":"2026-11-29T18:59:00Z"}`},
		{".registrar/breakers/orders/state", `{"state":"Closed","by":"web-1","reason":"probe succeeded","at":"2026-11-29T17:00:00Z"}`},
		{".registrar/breakers/broken/state", `{"state":"Sideways"}`},
		// The operator's self-monitoring keys (issue 19).
		{".registrar/heartbeat", `{"writer":"registrar-7f9c-0","time":"2026-11-29T18:59:58Z","seq":42,"intervalSeconds":5,"revision":17}`},
		{".registrar/canary/registrar-system/canary", `{"service":"canary","namespace":"registrar-system","pod":"canary","uid":"canary-7","address":"192.0.2.1","ports":{},"node":"","zone":"","cluster":"","owner":"registrar-canary","registeredAt":"2026-11-29T18:59:56Z"}`},
	}
	for _, v := range values {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := cli.Put(ctx, seedPrefix+v.key, v.value)
		cancel()
		if err != nil {
			return fmt.Errorf("seed %s: %w", v.key, err)
		}
	}
	return nil
}

func requireServer(t *testing.T) { etcdtest.Shared(t) }

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// run runs registrarctl against the test store with env variables vars.
func run(ctx context.Context, args []string, vars map[string]string) (code int, stdout, stderr string) {
	var out, errOut syncBuffer
	code = ctl.Run(ctx, args, ctl.Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }, Now: func() time.Time { return now }})
	return code, out.String(), errOut.String()
}

func storeVars() map[string]string {
	return map[string]string{"REGISTRAR_STORE_ENDPOINTS": server.Endpoint(), "REGISTRAR_STORE_TIMEOUT": "30s"}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/ctl/ -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test ./internal/ctl/ -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestOutputFormats(t *testing.T) {
	requireServer(t)
	tests := []struct {
		golden string
		args   []string
	}{
		{"list.golden", []string{"list"}},
		{"list-wide.golden", []string{"list", "-o", "wide"}},
		{"list-json.golden", []string{"-o", "json", "list"}},
		{"list-yaml.golden", []string{"list", "--output=yaml"}},
		{"list-orders.golden", []string{"list", "orders"}},
		{"get.golden", []string{"get", "orders/shop/orders-a"}},
		{"get-short.golden", []string{"get", "payments/payments-1", "-o", "wide"}},
		{"get-json.golden", []string{"get", "orders/shop/orders-b", "-o", "json"}},
		{"get-yaml.golden", []string{"get", "orders/shop/orders-b", "-o", "yaml"}},
		{"breakers.golden", []string{"breakers"}},
		{"breakers-wide.golden", []string{"breakers", "-o", "wide"}},
		{"breakers-json.golden", []string{"breakers", "-o", "json"}},
		{"breakers-yaml.golden", []string{"breakers", "payments", "-o", "yaml"}},
		{"breakers-payments.golden", []string{"breakers", "payments"}},
		{"health.golden", []string{"health"}},
		{"health-json.golden", []string{"health", "-o", "json"}},
		{"health-stale.golden", []string{"health", "--stale-after", "1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			code, stdout, stderr := run(context.Background(), tt.args, storeVars())
			if code != ctl.ExitOK {
				t.Fatalf("exit %d, stderr %s", code, stderr)
			}
			golden(t, tt.golden, stdout)
		})
	}
}

func TestListReportsUndecodableKeys(t *testing.T) {
	requireServer(t)
	code, _, stderr := run(context.Background(), []string{"list"}, storeVars())
	if code != ctl.ExitOK || !strings.Contains(stderr, "skipping decode /registrar/services/broken/x/y") {
		t.Errorf("exit %d, stderr %q; want 0 and a note about the undecodable key", code, stderr)
	}
}

// TestListIgnoresOperatorKeys: the operator's own keys and the coordinated breakers under
// {prefix}/.registrar/ are not instances: list neither shows nor complains about them.
func TestListIgnoresOperatorKeys(t *testing.T) {
	requireServer(t)
	code, stdout, stderr := run(context.Background(), []string{"list"}, storeVars())
	if code != ctl.ExitOK || strings.Contains(stderr, ".registrar") || strings.Contains(stdout, ".registrar") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and nothing about {prefix}/.registrar/", code, stdout, stderr)
	}
}

func TestBreakersReportsUndecodableState(t *testing.T) {
	requireServer(t)
	code, stdout, stderr := run(context.Background(), []string{"breakers"}, storeVars())
	if code != ctl.ExitOK || !strings.Contains(stderr, "skipping /registrar/services/.registrar/breakers/broken/state") || strings.Contains(stdout, "broken") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, the undecodable state noted on stderr and not shown", code, stdout, stderr)
	}
}

// TestFlagsAndEnv checks that flags win over the environment, as in the operator.
func TestFlagsAndEnv(t *testing.T) {
	requireServer(t)
	vars := map[string]string{"REGISTRAR_STORE_ENDPOINTS": "http://127.0.0.1:1", "REGISTRAR_STORE_PREFIX": "/nothing-here"}
	code, stdout, stderr := run(context.Background(),
		[]string{"--store-endpoints", server.Endpoint(), "--store-prefix", "/registrar/services", "list", "orders"}, vars)
	if code != ctl.ExitOK || !strings.Contains(stdout, "orders-a") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	vars = map[string]string{"REGISTRAR_STORE_ENDPOINTS": server.Endpoint(), "REGISTRAR_STORE_PREFIX": "/nothing-here"}
	if code, _, _ := run(context.Background(), []string{"list", "orders"}, vars); code != ctl.ExitNotFound {
		t.Errorf("REGISTRAR_STORE_PREFIX ignored: exit %d, want %d", code, ctl.ExitNotFound)
	}
}

func TestExitCodes(t *testing.T) {
	requireServer(t)
	closed := closedURL(t)
	noMetrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE something_else counter\nsomething_else 1")
	}))
	defer noMetrics.Close()
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"help", []string{"-h"}, ctl.ExitOK},
		{"no command", nil, ctl.ExitUsage},
		{"unknown command", []string{"describe"}, ctl.ExitUsage},
		{"unknown flag", []string{"list", "--nope"}, ctl.ExitUsage},
		{"bad output format", []string{"list", "-o", "xml"}, ctl.ExitUsage},
		{"bad timeout", []string{"list", "--store-timeout", "soon"}, ctl.ExitUsage},
		{"cert without key", []string{"list", "--store-cert-file", "c.pem"}, ctl.ExitUsage},
		{"get without pod", []string{"get", "orders"}, ctl.ExitUsage},
		{"get too many arguments", []string{"get", "orders/a", "orders/b"}, ctl.ExitUsage},
		{"watch without service", []string{"watch"}, ctl.ExitUsage},
		{"list a service", []string{"list", "orders"}, ctl.ExitOK},
		{"list a service with no instances", []string{"list", "nosuch"}, ctl.ExitNotFound},
		{"get a missing instance", []string{"get", "orders/shop/nope"}, ctl.ExitNotFound},
		{"get a missing namespace", []string{"get", "orders/other/orders-a"}, ctl.ExitNotFound},
		{"missing TLS files", []string{"list", "--store-ca-file", "/nonexistent/ca.pem"}, ctl.ExitError},
		{"list, store unreachable", []string{"list", "--store-endpoints", closed, "--store-timeout", "1s"}, ctl.ExitUnreachable},
		{"get, store unreachable", []string{"get", "orders/shop/orders-a", "--store-endpoints", closed, "--store-timeout", "1s"}, ctl.ExitUnreachable},
		{"watch, store unreachable", []string{"watch", "orders", "--store-endpoints", closed, "--store-timeout", "1s"}, ctl.ExitUnreachable},
		{"lag, endpoint unreachable", []string{"lag", "--metrics-url", closed + "/metrics", "--store-timeout", "5s"}, ctl.ExitUnreachable},
		{"lag, no registrar metrics", []string{"lag", "--metrics-url", noMetrics.URL}, ctl.ExitNotFound},
		{"breakers of a service", []string{"breakers", "orders"}, ctl.ExitOK},
		{"breakers of a service without one", []string{"breakers", "nosuch"}, ctl.ExitNotFound},
		{"breakers with a path", []string{"breakers", "orders/shop"}, ctl.ExitUsage},
		{"breakers, two services", []string{"breakers", "orders", "payments"}, ctl.ExitUsage},
		{"breakers, store unreachable", []string{"breakers", "--store-endpoints", closed, "--store-timeout", "1s"}, ctl.ExitUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(context.Background(), tt.args, storeVars())
			if code != tt.want {
				t.Errorf("registrarctl %s: exit %d, want %d; stderr: %s", strings.Join(tt.args, " "), code, tt.want, stderr)
			}
		})
	}
}

// closedURL is a loopback URL nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

// TestWatch follows a service while instances come and go, in each output format.
func TestWatch(t *testing.T) {
	requireServer(t)
	cli, err := server.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, format := range []string{"", "json", "yaml", watchJSONPath} {
		t.Run("format="+format, func(t *testing.T) {
			prefix := "/watch-" + strings.ReplaceAll(t.Name(), "/", "-")
			key := func(pod string) string { return prefix + "/web/default/" + pod }
			value := func(pod, addr string) string {
				return fmt.Sprintf(`{"service":"web","namespace":"default","pod":%q,"address":%q,"ports":{"http":80}}`, pod, addr)
			}
			mustPut(t, cli, key("web-1"), value("web-1", "10.9.0.1"))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errOut syncBuffer
			done := make(chan int, 1)
			go func() {
				args := []string{"watch", "web", "--store-prefix", prefix}
				if format != "" {
					args = append(args, "-o", format)
				}
				done <- ctl.Run(ctx, args, ctl.Env{Stdout: &out, Stderr: &errOut, Now: func() time.Time { return now },
					Getenv: func(k string) string { return storeVars()[k] }})
			}()
			waitFor(t, &out, "ADDED", 1)
			mustPut(t, cli, key("web-2"), value("web-2", "10.9.0.2"))
			waitFor(t, &out, "ADDED", 2)
			mustPut(t, cli, key("web-1"), value("web-1", "10.9.0.11"))
			waitFor(t, &out, "UPDATED", 1)
			if _, err := cli.Delete(context.Background(), key("web-2")); err != nil {
				t.Fatal(err)
			}
			waitFor(t, &out, "REMOVED", 1)
			cancel()
			select {
			case code := <-done:
				if code != ctl.ExitOK {
					t.Fatalf("exit %d, stderr %s", code, errOut.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatal("watch did not end after its context was cancelled")
			}
			// Store revisions depend on what ran before (-count=N): the golden files say REV.
			got := revision.ReplaceAllString(out.String(), "${1}REV")
			golden(t, "watch"+map[string]string{"": "", "json": "-json", "yaml": "-yaml", watchJSONPath: "-jsonpath"}[format]+".golden", got)
		})
	}
}

// watchJSONPath is a -o jsonpath= template applied to each watch event.
const watchJSONPath = `jsonpath={.event} {.instance.pod} {.instance.address}{"\n"}`

var revision = regexp.MustCompile(`("revision":|revision: )\d+`)

func mustPut(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, value); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until s occurs at least n times in out.
func waitFor(t *testing.T, out *syncBuffer, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(out.String(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %d× %q in watch output after 60s:\n%s", n, s, out.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the output of a running command
	}
}

var observeOnce sync.Once

// TestLag reads the operator's own lag histograms (internal/metrics) from a metrics endpoint.
func TestLag(t *testing.T) {
	observeOnce.Do(func() { // the histograms are global: observe once even under -count=N
		for _, v := range []float64{0.007, 0.009, 0.012, 0.02, 0.03, 0.3, 1.5} {
			metrics.DeregistrationLag.Observe(v)
		}
		for _, v := range []float64{0.4, 0.6} {
			metrics.RegistrationLag.Observe(v)
		}
	})
	srv := httptest.NewServer(promhttp.HandlerFor(prometheus.Gatherers{ctrlmetrics.Registry}, promhttp.HandlerOpts{}))
	defer srv.Close()
	for _, format := range []string{"", "json", "yaml"} {
		t.Run("format="+format, func(t *testing.T) {
			args := []string{"lag", "--metrics-url", srv.URL + "/metrics"}
			if format != "" {
				args = append(args, "-o", format)
			}
			code, stdout, stderr := run(context.Background(), args, map[string]string{"REGISTRAR_METRICS_URL": "http://127.0.0.1:1/ignored"})
			if code != ctl.ExitOK {
				t.Fatalf("exit %d, stderr %s", code, stderr)
			}
			golden(t, "lag"+map[string]string{"": "", "json": "-json", "yaml": "-yaml"}[format]+".golden", stdout)
		})
	}
}

// TestWatchReportsOutages stops the store under a running watch: it prints DISCONNECTED,
// keeps running, and prints RECONNECTED when the store is back.
func TestWatchReportsOutages(t *testing.T) {
	requireServer(t)
	srv, err := etcdtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	mustPut(t, cli, "/registrar/services/web/default/web-1", `{"service":"web","namespace":"default","pod":"web-1","address":"10.9.0.1","ports":{"http":80}}`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- ctl.Run(ctx, []string{"watch", "web", "--store-endpoints", srv.Endpoint(), "--store-timeout", "2s"},
			ctl.Env{Stdout: &out, Stderr: &errOut, Now: func() time.Time { return now }, Getenv: func(string) string { return "" }})
	}()
	waitFor(t, &out, "ADDED", 1)
	srv.Stop()
	waitFor(t, &out, "DISCONNECTED", 1)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "RECONNECTED", 1)
	mustPut(t, cli, "/registrar/services/web/default/web-2", `{"service":"web","namespace":"default","pod":"web-2","address":"10.9.0.2","ports":{"http":80}}`)
	waitFor(t, &out, "ADDED", 2)
	cancel()
	select {
	case code := <-done:
		if code != ctl.ExitOK {
			t.Fatalf("exit %d, stderr %s", code, errOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("watch did not end after its context was cancelled")
	}
	t.Logf("watch output:\n%s", out.String())
	if !strings.Contains(out.String(), "store unreachable; the list was last confirmed") {
		t.Errorf("DISCONNECTED line without its explanation:\n%s", out.String())
	}
}

// TestBreakersFromLiveCallers: two callers with a coordinated breaker see their dependency
// fail; registrarctl breakers shows what they wrote: the shared Open and both reports.
func TestBreakersFromLiveCallers(t *testing.T) {
	requireServer(t)
	const prefix = "/ctl-breakers"
	cli, err := server.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, prefix+"/", clientv3.WithPrefix()); err != nil { // each -count run starts clean
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, prefix+"/pay/ns/p0", `{"address":"10.0.0.1","ports":{"http":80}}`); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"caller-a", "caller-b"} {
		c, err := discovery.New(discovery.Config{
			Endpoints: []string{server.Endpoint()}, Prefix: prefix, Service: "pay",
			Breaker: discovery.BreakerConfig{MinCalls: 2, OpenDuration: time.Hour,
				Coordinated: &discovery.CoordinatedConfig{Quorum: 2, CallerID: id, StoreTimeout: 10 * time.Second}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
		for len(c.All()) == 0 || c.BreakerStats().Coordinated.Fallback {
			if ctx.Err() != nil {
				t.Fatal("caller not ready")
			}
			time.Sleep(10 * time.Millisecond)
		}
		for range 2 {
			_ = c.Do(ctx, 1, func(context.Context, discovery.Instance) error { return errors.New("503") })
		}
	}
	vars := storeVars()
	vars["REGISTRAR_STORE_PREFIX"] = prefix
	var stdout string
	for {
		var code int
		code, stdout, _ = run(ctx, []string{"breakers", "pay"}, vars)
		if code == ctl.ExitOK && strings.Contains(stdout, "Open") && strings.Count(stdout, "Tripped") == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("registrarctl breakers never showed the shared breaker open with two reports:\n%s", stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"(fleet)", "2 callers reported failure (quorum 2)", "caller-a", "caller-b", "failure rate 1.00 >= 0.50 over 2 calls"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestHealthWithoutHeartbeat: a prefix no operator writes: exit 3, saying why.
func TestHealthWithoutHeartbeat(t *testing.T) {
	requireServer(t)
	code, stdout, stderr := run(context.Background(), []string{"health", "--store-prefix", "/nobody/here"}, storeVars())
	if code != ctl.ExitNotFound || !strings.Contains(stderr, "no heartbeat at /nobody/here/.registrar/heartbeat") || strings.Contains(stdout, "heartbeat ") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestHealthOfEachReplica: operators that write per-replica heartbeats only (--sharding=lease,
// --store-shared): each is shown with its cluster and replica, and the prefix has a heartbeat.
func TestHealthOfEachReplica(t *testing.T) {
	requireServer(t)
	cli, err := server.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	const prefix = "/replicas/here"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, w := range [][2]string{{"east", "registrar-0"}, {"west", "registrar-1"}} {
		v, _ := wire.EncodeHeartbeat(wire.Heartbeat{Writer: w[1] + "_1_2", Cluster: w[0], Replica: w[1],
			Time: time.Now(), Seq: 3, IntervalSeconds: 5})
		if _, err := cli.Put(ctx, wire.ReplicaHeartbeatKey(prefix, w[0], w[1]), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := run(ctx, []string{"health", "--store-prefix", prefix}, storeVars())
	if code != ctl.ExitOK {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, want := range []string{"east/registrar-0", "west/registrar-1", "Fresh"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestListNamespace: -n/--namespace lists only the instances registered from one namespace
// (issue 34: another namespace's registry of the same service name), with or without a
// service; none of a service in that namespace is "not found".
func TestListNamespace(t *testing.T) {
	requireServer(t)
	cli, err := server.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	prefix := "/list-namespace"
	for _, kv := range []struct{ ns, pod string }{{"shop", "orders-a"}, {"shop-b", "orders-b"}, {"other", "orders-c"}} {
		mustPut(t, cli, prefix+"/orders/"+kv.ns+"/"+kv.pod,
			fmt.Sprintf(`{"service":"orders","namespace":%q,"pod":%q,"address":"10.34.0.1","ports":{"http":80}}`, kv.ns, kv.pod))
	}
	pods := func(args ...string) (int, string) {
		t.Helper()
		code, stdout, stderr := run(context.Background(), append(args, "--store-prefix", prefix, "-o", "jsonpath={[*].pod}"), storeVars())
		if code != ctl.ExitOK && code != ctl.ExitNotFound {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
		return code, stdout
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"list", "orders"}, ctl.ExitOK, "orders-c orders-b orders-a"},
		{[]string{"list", "orders", "-n", "shop"}, ctl.ExitOK, "orders-a"},
		{[]string{"list", "orders", "--namespace", "shop-b"}, ctl.ExitOK, "orders-b"},
		{[]string{"list", "-n", "other"}, ctl.ExitOK, "orders-c"},
		{[]string{"list", "orders", "-n", "nowhere"}, ctl.ExitNotFound, ""},
	} {
		code, got := pods(tc.args...)
		if code != tc.code || strings.TrimSpace(got) != tc.want {
			t.Errorf("%v: exit %d, pods %q; want %d, %q", tc.args, code, got, tc.code, tc.want)
		}
	}
	if code, _, stderr := run(context.Background(), []string{"list", "orders", "-n", "a/b"}, storeVars()); code != ctl.ExitUsage || !strings.Contains(stderr, "--namespace") {
		t.Errorf("-n a/b: exit %d, stderr %q; want a usage error", code, stderr)
	}
}

// TestWatchNamespace: watch -n follows only the instances registered from that namespace.
func TestWatchNamespace(t *testing.T) {
	requireServer(t)
	cli, err := server.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	prefix := "/watch-namespace"
	value := func(ns, pod string) string {
		return fmt.Sprintf(`{"service":"orders","namespace":%q,"pod":%q,"address":"10.34.0.1","ports":{"http":80}}`, ns, pod)
	}
	mustPut(t, cli, prefix+"/orders/shop/orders-a", value("shop", "orders-a"))
	mustPut(t, cli, prefix+"/orders/other/orders-x", value("other", "orders-x"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- ctl.Run(ctx, []string{"watch", "orders", "-n", "shop", "--store-prefix", prefix}, ctl.Env{Stdout: &out, Stderr: &errOut,
			Now: func() time.Time { return now }, Getenv: func(k string) string { return storeVars()[k] }})
	}()
	waitFor(t, &out, "ADDED", 1)
	mustPut(t, cli, prefix+"/orders/other/orders-y", value("other", "orders-y"))
	mustPut(t, cli, prefix+"/orders/shop/orders-b", value("shop", "orders-b"))
	waitFor(t, &out, "ADDED", 2)
	cancel()
	if code := <-done; code != ctl.ExitOK {
		t.Fatalf("watch exit %d, stderr %q", code, errOut.String())
	}
	if got := out.String(); strings.Contains(got, "orders-x") || strings.Contains(got, "orders-y") || !strings.Contains(got, "orders-b") {
		t.Errorf("watch -n shop printed %q; want shop's instances only", got)
	}
}
