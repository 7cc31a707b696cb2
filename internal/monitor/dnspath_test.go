package monitor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/monitor"
	"github.com/registrar-dev/registrar/internal/store"
	corednsstore "github.com/registrar-dev/registrar/internal/store/coredns"
	"github.com/registrar-dev/registrar/test/support/corednstest"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// TestDNSCanary: against a real CoreDNS reading the shared etcd, canary rounds write the
// record and see it in a real DNS answer; the canary never shows in a service's answer, nor
// in the CoreDNS store's listing of a scope; CoreDNS stopped, rounds fail at the visible
// stage.
func TestDNSCanary(t *testing.T) {
	cli, prefix := client(t)
	const zone = "canary.test"
	pathPrefix := "/skydns" + strings.ReplaceAll(prefix, "/", "-")
	srv, err := corednstest.Start(t.TempDir(), zone, pathPrefix, etcdtest.Shared(t).Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	// A real service in the zone, written by the CoreDNS store.
	st := corednsstore.New(cli, corednsstore.Options{Prefix: pathPrefix, Zone: zone})
	scope := store.Scope{Service: "web", Namespace: "shop"}
	ctx := context.Background()
	if _, err := st.Apply(ctx, scope, store.Changes{Create: []store.Endpoint{{Pod: "web-1", Address: "10.1.0.1", Owner: "o1", Namespace: "shop", Service: "web"}}}); err != nil {
		t.Fatal(err)
	}
	path := monitor.NewDNSPath(cli, pathPrefix, zone, srv.Addr, "c1", "Registrar.0")
	if path.Name() != monitor.DNSWriterLabel("c1", "Registrar.0")+"._canary._registrar."+zone+"." ||
		!strings.HasPrefix(path.Name(), "registrar-0-") {
		t.Fatalf("name %s", path.Name())
	}
	label := "coredns-" + t.Name()
	c := &monitor.Canary{Store: label, Path: path, Log: testr.New(t)}
	okBefore := testutil.ToFloat64(metrics.CanaryProbes.WithLabelValues(c.Store, "ok"))
	for seq := int64(1); seq <= 3; seq++ {
		if err := c.Round(ctx, seq, 10*time.Second); err != nil {
			t.Fatalf("round %d: %v", seq, err)
		}
	}
	if got := testutil.ToFloat64(metrics.CanaryProbes.WithLabelValues(label, "ok")); got-okBefore != 3 {
		t.Errorf("registrar_canary_probes_total{result=ok} moved by %v, want 3", got-okBefore)
	}
	// The record really is in CoreDNS's answer (a separate query), with round 3's address.
	r, err := srv.Query(path.Name(), dns.TypeA)
	if err != nil || len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), "192.0.2.4") {
		t.Fatalf("canary answer %v, %v", r, err)
	}
	// Callers of the service see only the service's pod.
	r, err = srv.Query("web.shop."+zone, dns.TypeA)
	if err != nil || len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), "10.1.0.1") {
		t.Errorf("service answer %v, %v", r, err)
	}
	recs, err := st.List(ctx, scope)
	if err != nil || len(recs) != 1 {
		t.Errorf("CoreDNS store lists %v (%v), want the one pod", recs, err)
	}
	resp, err := cli.Get(ctx, path.Key())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("canary key %s: %v", path.Key(), err)
	}
	var raw map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &raw); err != nil || raw["registrar"] != nil {
		t.Errorf("canary record %s carries registrar metadata (or is not JSON: %v)", resp.Kvs[0].Value, err)
	}

	srv.Stop()
	failed := testutil.ToFloat64(metrics.CanaryFailures.WithLabelValues(label, "visible"))
	if err := c.Round(ctx, 4, 2*time.Second); err == nil {
		t.Fatal("round succeeded with CoreDNS stopped")
	}
	if got := testutil.ToFloat64(metrics.CanaryFailures.WithLabelValues(label, "visible")); got-failed != 1 {
		t.Errorf("registrar_canary_failures_total{stage=visible} moved by %v, want 1", got-failed)
	}
	if st := c.State(); st.ConsecutiveFailures != 1 || !strings.Contains(st.LastErr.Error(), "not visible") {
		t.Errorf("state %+v", st)
	}
}
