package monitor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/monitor"
	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/netproxy"
)

// client is a new client of the shared etcd; prefix is a fresh prefix of the test's own.
func client(t *testing.T) (*clientv3.Client, string) {
	t.Helper()
	cli, err := etcdtest.Shared(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli, fmt.Sprintf("/monitor-test/%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHeartbeatAdvances: the replica's heartbeat key's revision advances every interval, read
// back with a separate client, and its value names the writer, its cluster and replica; with
// Legacy the single leader's key is written in the same transaction. When the writer stops,
// its key goes (its lease revoked); the single leader's key stays, as it always did.
func TestHeartbeatAdvances(t *testing.T) {
	cli, prefix := client(t)
	reader, _ := client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := testutil.ToFloat64(metrics.HeartbeatWrites.WithLabelValues("ok"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&monitor.Heartbeat{KV: cli, Lease: cli, Prefix: prefix, Cluster: "c1", Replica: "r0", Writer: "w1", Legacy: true,
			Interval: 100 * time.Millisecond, Log: testr.New(t)}).Start(ctx)
	}()
	var revs []int64
	eventually(t, 10*time.Second, "three heartbeats", func() bool {
		gctx, gcancel := context.WithTimeout(context.Background(), time.Second)
		defer gcancel()
		resp, err := reader.Get(gctx, wire.ReplicaHeartbeatKey(prefix, "c1", "r0"))
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		hb, err := wire.DecodeHeartbeat(resp.Kvs[0].Value)
		if err != nil || hb.Writer != "w1" || hb.Cluster != "c1" || hb.Replica != "r0" || hb.IntervalSeconds != 0.1 ||
			resp.Kvs[0].Lease == 0 {
			t.Fatalf("heartbeat value %s (lease %x): %v", resp.Kvs[0].Value, resp.Kvs[0].Lease, err)
		}
		legacy, err := reader.Get(gctx, wire.HeartbeatKey(prefix))
		if err != nil || len(legacy.Kvs) != 1 || legacy.Kvs[0].ModRevision < resp.Kvs[0].ModRevision {
			t.Fatalf("single leader's heartbeat %v behind %d: %v", legacy.Kvs, resp.Kvs[0].ModRevision, err)
		}
		if len(revs) == 0 || resp.Kvs[0].ModRevision > revs[len(revs)-1] {
			revs = append(revs, resp.Kvs[0].ModRevision)
		}
		return len(revs) >= 3
	})
	// The reader may see a write before the writer has its answer and counts it: wait for the
	// count rather than read it once (cancelling now could lose the third write's answer).
	eventually(t, 10*time.Second, "three heartbeat writes counted ok", func() bool {
		return testutil.ToFloat64(metrics.HeartbeatWrites.WithLabelValues("ok"))-before >= 3
	})
	cancel()
	<-done
	gctx, gcancel := context.WithTimeout(context.Background(), time.Second)
	defer gcancel()
	if resp, err := reader.Get(gctx, wire.ReplicaHeartbeatKey(prefix, "c1", "r0")); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the stopped writer's heartbeat %v: %v; want it gone", resp.Kvs, err)
	}
	if resp, err := reader.Get(gctx, wire.HeartbeatKey(prefix)); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("the single leader's heartbeat %v: %v; want it kept", resp, err)
	}
}

// TestCanaryVisibleAndHidden: canary rounds against real etcd succeed, record their latency,
// and the synthetic endpoint never appears in a caller's instance list.
func TestCanaryVisibleAndHidden(t *testing.T) {
	cli, prefix := client(t)
	path, err := monitor.NewEtcdPath(monitor.EtcdPathConfig{KV: cli, Prefix: prefix, Reader: cli, Namespace: "ns", Cluster: "c1", Replica: "r0"})
	if err != nil {
		t.Fatal(err)
	}
	defer path.Close()
	store := "etcd-" + t.Name()
	c := &monitor.Canary{Store: store, Path: path, Log: testr.New(t)}
	ctx := context.Background()
	okBefore := testutil.ToFloat64(metrics.CanaryProbes.WithLabelValues(c.Store, "ok"))
	for seq := int64(1); seq <= 3; seq++ {
		if err := c.Round(ctx, seq, 10*time.Second); err != nil {
			t.Fatalf("round %d: %v", seq, err)
		}
	}
	if got := testutil.ToFloat64(metrics.CanaryProbes.WithLabelValues(store, "ok")); got-okBefore != 3 {
		t.Errorf("registrar_canary_probes_total{result=ok} moved by %v, want 3", got-okBefore)
	}
	if got := testutil.ToFloat64(metrics.CanaryUp.WithLabelValues(store)); got != 1 {
		t.Errorf("registrar_canary_up = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(metrics.CanaryVisibility, "registrar_canary_visibility_seconds"); n == 0 {
		t.Error("no registrar_canary_visibility_seconds series")
	}
	// The key is where the contract says, and a separate client reads it.
	resp, err := cli.Get(ctx, path.Key())
	if err != nil || len(resp.Kvs) != 1 || !wire.IsReserved(prefix, path.Key()) {
		t.Fatalf("canary key %s: %v %v (reserved: %v)", path.Key(), resp, err, wire.IsReserved(prefix, path.Key()))
	}
	// Callers: a discovery client of every plausible service name sees nothing of it.
	for _, svc := range []string{"canary", "ns", "registrar"} {
		dc, err := discovery.New(discovery.Config{Client: cli, Prefix: prefix, Service: svc, IgnoreHeartbeat: true})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = dc.WaitSynced(wctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if all := dc.All(); len(all) != 0 {
			t.Errorf("caller of service %q sees %v", svc, all)
		}
		_ = dc.Close()
	}
	for _, svc := range []string{".registrar", ".registrar/canary", wire.ReservedDir} {
		if _, err := discovery.New(discovery.Config{Client: cli, Prefix: prefix, Service: svc}); err == nil {
			t.Errorf("discovery accepted service %q, which would read the reserved subtree", svc)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := path.Cleanup(cctx); err != nil {
		t.Fatal(err)
	}
}

// TestCanaryPathBroken: the callers' path to the store is cut (a proxy in front of the
// canary's reader): rounds fail at the visible stage, the failure metric moves, the store's
// verdict turns CanaryFailing; restored, it recovers.
func TestCanaryPathBroken(t *testing.T) {
	cli, prefix := client(t)
	proxy, err := netproxy.New(strings.TrimPrefix(etcdtest.Shared(t).Endpoint(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	reader, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + proxy.Addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	path, err := monitor.NewEtcdPath(monitor.EtcdPathConfig{KV: cli, Prefix: prefix, Reader: reader, Namespace: "ns", Cluster: "c1", Replica: "r0"})
	if err != nil {
		t.Fatal(err)
	}
	defer path.Close()
	store := "etcd-" + t.Name()
	c := &monitor.Canary{Store: store, Path: path, Log: testr.New(t)}
	p := &monitor.Prober{Store: store, Cluster: cli, Canary: c, Timeout: 2 * time.Second, Log: testr.New(t)}
	ctx := context.Background()
	if err := c.Round(ctx, 1, 10*time.Second); err != nil {
		t.Fatalf("round before the cut: %v", err)
	}
	if h := p.ProbeOnce(ctx); !h.OK {
		t.Fatalf("before the cut: %+v", h)
	}
	proxy.Cut()
	failed := testutil.ToFloat64(metrics.CanaryFailures.WithLabelValues(store, "visible"))
	for seq := int64(2); seq <= 3; seq++ {
		if err := c.Round(ctx, seq, 2*time.Second); err == nil {
			t.Fatalf("round %d succeeded with the callers' path cut", seq)
		}
	}
	if got := testutil.ToFloat64(metrics.CanaryFailures.WithLabelValues(store, "visible")); got-failed != 2 {
		t.Errorf("registrar_canary_failures_total{stage=visible} moved by %v, want 2", got-failed)
	}
	if got := testutil.ToFloat64(metrics.CanaryUp.WithLabelValues(store)); got != 0 {
		t.Errorf("registrar_canary_up = %v, want 0", got)
	}
	h := p.ProbeOnce(ctx)
	if h.OK || h.Reason != v1beta1.ReasonCanaryFailing || testutil.ToFloat64(metrics.StoreHealthy.WithLabelValues(store)) != 0 {
		t.Fatalf("verdict with the canary failing: %+v", h)
	}
	proxy.Restore()
	eventually(t, time.Minute, "a canary round after the restore", func() bool { return c.Round(ctx, 4, 3*time.Second) == nil })
	if h := p.ProbeOnce(ctx); !h.OK {
		t.Fatalf("after the restore: %+v", h)
	}
}

// TestProberSingleMember: the prober reads a real one-member cluster: healthy, a leader, a
// database size and quota, a raft term.
func TestProberSingleMember(t *testing.T) {
	cli, _ := client(t)
	store := "etcd-" + t.Name()
	p := &monitor.Prober{Store: store, Cluster: cli, Log: testr.New(t)}
	h := p.ProbeOnce(context.Background())
	if !h.OK || h.Members != 1 || h.Healthy != 1 || !h.LeaderPresent || h.Term == 0 || h.MaxDBSize == 0 || h.Quota == 0 {
		t.Fatalf("health = %+v", h)
	}
	for name, want := range map[string]float64{
		"members": 1, "healthy": 1, "quorum": 1, "tolerance": 0, "leader": 1, "ok": 1,
	} {
		g := map[string]float64{
			"members":   testutil.ToFloat64(metrics.StoreMembers.WithLabelValues(store)),
			"healthy":   testutil.ToFloat64(metrics.StoreMembersHealthy.WithLabelValues(store)),
			"quorum":    testutil.ToFloat64(metrics.StoreQuorum.WithLabelValues(store)),
			"tolerance": testutil.ToFloat64(metrics.StoreFailureTolerance.WithLabelValues(store)),
			"leader":    testutil.ToFloat64(metrics.StoreLeaderPresent.WithLabelValues(store)),
			"ok":        testutil.ToFloat64(metrics.StoreHealthy.WithLabelValues(store)),
		}[name]
		if g != want {
			t.Errorf("%s = %v, want %v", name, g, want)
		}
	}
	if q := testutil.ToFloat64(metrics.StoreDBQuota.WithLabelValues(store)); q <= 0 {
		t.Errorf("registrar_store_db_quota_bytes = %v", q)
	}
}

// TestProberUnreachable: nothing answers: StoreUnreachable within the timeout.
func TestProberUnreachable(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	p := &monitor.Prober{Store: "etcd-" + t.Name(), Cluster: cli, Timeout: 500 * time.Millisecond, Log: testr.New(t)}
	start := time.Now()
	h := p.ProbeOnce(context.Background())
	if h.OK || h.Reason != v1beta1.ReasonStoreUnreachable {
		t.Fatalf("health = %+v", h)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("probe took %s with a 500ms timeout", took)
	}
}
