package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/discovery/discoverymetrics"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// heartbeater writes the heartbeat as the operator does, until stopped.
type heartbeater struct {
	cli    *clientv3.Client
	prefix string
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

func (h *heartbeater) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for seq := int64(1); ctx.Err() == nil; seq++ {
			v, _ := wire.EncodeHeartbeat(wire.Heartbeat{Writer: "test", Time: time.Now(), Seq: seq, IntervalSeconds: 0.1})
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			_, _ = h.cli.Put(pctx, wire.HeartbeatKey(h.prefix), string(v))
			pcancel()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(h.halt)
}

func (h *heartbeater) halt() {
	if h.stop != nil {
		h.stop()
	}
	h.wg.Wait()
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStaleWhenHeartbeatStops: while the heartbeat advances the list is fresh; when the
// writer stops the client reports Stale (reason heartbeat, metric 1) and keeps serving the
// last known-good list; when it writes again the client recovers.
func TestStaleWhenHeartbeatStops(t *testing.T) {
	srv := requireServer(t)
	cli := storeClient(t, srv)
	prefix := fmt.Sprintf("/stale-test/%d", time.Now().UnixNano())
	val, _ := json.Marshal(endpoint("svc", "p1", "10.0.0.1"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, prefix+"/svc/ns/p1", string(val)); err != nil {
		t.Fatal(err)
	}
	hb := &heartbeater{cli: cli, prefix: prefix}
	hb.start(t)
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, Service: "svc", StaleAfter: time.Second})
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(discoverymetrics.NewCollector(c))
	staleMetric := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "registrar_discovery_stale" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no registrar_discovery_stale")
		return -1
	}
	waitUntil(t, 10*time.Second, "heartbeat seen", func() bool { f := c.Freshness(); return f.HeartbeatRevision > 0 && !f.Stale })
	if f := c.Freshness(); f.Writer != "test" || f.HeartbeatAge > time.Second {
		t.Fatalf("fresh: %+v", f)
	}
	if staleMetric() != 0 {
		t.Fatal("registrar_discovery_stale = 1 while the heartbeat advances")
	}
	hb.halt()
	stopped := time.Now()
	waitUntil(t, 10*time.Second, "stale after the heartbeat stopped", c.Stale)
	// The last heartbeat may precede the halt by one interval (100ms).
	if took := time.Since(stopped); took < time.Second-200*time.Millisecond {
		t.Errorf("stale %s after the heartbeat stopped, well before StaleAfter (1s)", took)
	}
	f := c.Freshness()
	if f.Reason != "heartbeat" || f.HeartbeatAge <= time.Second || staleMetric() != 1 {
		t.Errorf("stale: %+v, metric %v", f, staleMetric())
	}
	if all := c.All(); len(all) != 1 || all[0].Pod != "p1" {
		t.Errorf("last known-good list not kept while stale: %v", all)
	}
	if _, err := c.Pick(); err != nil {
		t.Errorf("Pick while stale: %v", err)
	}
	hb.start(t)
	waitUntil(t, 10*time.Second, "fresh again once the heartbeat advances", func() bool { return !c.Stale() })
	if staleMetric() != 0 {
		t.Error("registrar_discovery_stale stays 1 after recovery")
	}
}

// TestStaleWithoutHeartbeat: with no operator heartbeat ever, the client reports stale once
// StaleAfter passed since it started; IgnoreHeartbeat turns that off.
func TestStaleWithoutHeartbeat(t *testing.T) {
	srv := requireServer(t)
	prefix := fmt.Sprintf("/stale-test/none-%d", time.Now().UnixNano())
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, Service: "svc", StaleAfter: 500 * time.Millisecond})
	ig := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, Service: "svc", StaleAfter: 500 * time.Millisecond, IgnoreHeartbeat: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ig.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "stale without a heartbeat", c.Stale)
	if f := c.Freshness(); f.Reason != "heartbeat" || f.HeartbeatRevision != 0 {
		t.Errorf("freshness %+v", f)
	}
	time.Sleep(time.Second) // longer than StaleAfter: a check of what does not happen
	if f := ig.Freshness(); f.Stale || f.HeartbeatAge != 0 {
		t.Errorf("IgnoreHeartbeat client: %+v", f)
	}
}

// TestStaleAfterFollowsWriterInterval: an operator that writes every 2s is given three of
// its intervals even when the client's StaleAfter is shorter.
func TestStaleAfterFollowsWriterInterval(t *testing.T) {
	srv := requireServer(t)
	cli := storeClient(t, srv)
	prefix := fmt.Sprintf("/stale-test/slow-%d", time.Now().UnixNano())
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, Service: "svc", StaleAfter: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	v, _ := wire.EncodeHeartbeat(wire.Heartbeat{Writer: "slow", Time: time.Now(), Seq: 1, IntervalSeconds: 2})
	if _, err := cli.Put(ctx, wire.HeartbeatKey(prefix), string(v)); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	waitUntil(t, 10*time.Second, "heartbeat seen", func() bool { return c.Freshness().HeartbeatRevision > 0 })
	waitUntil(t, 20*time.Second, "stale once three writer intervals passed", c.Stale)
	if took := time.Since(written); took < 6*time.Second-100*time.Millisecond {
		t.Errorf("stale %s after the only heartbeat, before three 2s intervals: %+v", took, c.Freshness())
	}
}

// TestStalePerCluster: a shared prefix holds instances of clusters east and west; each
// cluster's operator writes its own heartbeat key, and west's also the single leader's key
// naming west. When east's heartbeat stops the list is stale, naming east only, though
// west's go on (both of its keys); a caller of west's instances only stays fresh.
func TestStalePerCluster(t *testing.T) {
	srv := requireServer(t)
	cli := storeClient(t, srv)
	prefix := fmt.Sprintf("/stale-test/clusters-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ep := range []wire.Endpoint{
		{Service: "web", Namespace: "shop", Pod: "web-0", Address: "10.0.0.1", Cluster: "east"},
		{Service: "web", Namespace: "shop", Pod: "web-0", Address: "10.1.0.1", Cluster: "west"},
		{Service: "api", Namespace: "shop", Pod: "api-0", Address: "10.1.0.2", Cluster: "west"},
	} {
		v, _ := wire.Encode(&ep)
		if _, err := cli.Put(ctx, wire.ClusterKey(prefix, ep.Cluster, ep.Service, ep.Namespace, ep.Pod), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	beat := func(ctx context.Context, cluster string, keys ...string) {
		for seq := int64(1); ctx.Err() == nil; seq++ {
			v, _ := wire.EncodeHeartbeat(wire.Heartbeat{Writer: cluster + "-op", Cluster: cluster, Replica: "r0",
				Time: time.Now(), Seq: seq, IntervalSeconds: 0.1})
			for _, k := range keys {
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				_, _ = cli.Put(pctx, k, string(v))
				pcancel()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	eastCtx, stopEast := context.WithCancel(context.Background())
	westCtx, stopWest := context.WithCancel(context.Background())
	defer stopWest()
	go beat(eastCtx, "east", wire.ReplicaHeartbeatKey(prefix, "east", "r0"))
	go beat(westCtx, "west", wire.ReplicaHeartbeatKey(prefix, "west", "r0"), wire.HeartbeatKey(prefix))
	web := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, Service: "web", StaleAfter: time.Second})
	api := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, Service: "api", StaleAfter: time.Second})
	waitUntil(t, 10*time.Second, "both fresh", func() bool {
		return len(web.All()) == 2 && len(api.All()) == 1 && web.Freshness().HeartbeatRevision > 0 && !web.Stale() && !api.Stale()
	})
	stopEast()
	waitUntil(t, 10*time.Second, "web stale once east's heartbeat stops", web.Stale)
	if f := web.Freshness(); f.Reason != "heartbeat" || len(f.StaleClusters) != 1 || f.StaleClusters[0] != "east" || f.Writer != "east-op" {
		t.Errorf("web: %+v, want stale for east's heartbeat only", f)
	}
	if f := api.Freshness(); f.Stale {
		t.Errorf("api (west's instances only) stale while west writes: %+v", f)
	}
	stopWest()
	waitUntil(t, 10*time.Second, "api stale once west's heartbeats stop", api.Stale)
	if f := api.Freshness(); len(f.StaleClusters) != 1 || f.StaleClusters[0] != "west" {
		t.Errorf("api: %+v, want stale for west", f)
	}
}
