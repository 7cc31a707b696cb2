package monitor_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/monitor"
	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// writer is one operator replica's self-monitoring identity: its cluster and its replica.
type writer struct{ cluster, replica string }

// runHeartbeat runs the heartbeat of w, as cmd/ wires it, until the returned stop is called.
func runHeartbeat(t *testing.T, cli *clientv3.Client, prefix string, w writer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&monitor.Heartbeat{KV: cli, Lease: cli, Prefix: prefix, Cluster: w.cluster, Replica: w.replica, Writer: w.cluster + "/" + w.replica,
			Interval: 100 * time.Millisecond, Log: testr.New(t)}).Start(ctx)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// heartbeatWriters reads, with a separate client, every heartbeat under the prefix and
// returns the writers named in their values, by key.
func heartbeatWriters(t *testing.T, reader *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := reader.Get(ctx, wire.HeartbeatKey(prefix), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		if hb, err := wire.DecodeHeartbeat(kv.Value); err == nil {
			out[string(kv.Key)] = hb.Writer
		}
	}
	return out
}

func putEndpoint(t *testing.T, cli *clientv3.Client, prefix, cluster, service, pod, addr string) {
	t.Helper()
	val, err := wire.Encode(&wire.Endpoint{Service: service, Namespace: "shop", Pod: pod, Address: addr,
		Ports: map[string]int32{"http": 80}, Cluster: cluster, Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, wire.ClusterKey(prefix, cluster, service, "shop", pod), string(val)); err != nil {
		t.Fatal(err)
	}
}

func hasWriter(m map[string]string, w string) bool {
	for _, v := range m {
		if v == w {
			return true
		}
	}
	return false
}

// TestHeartbeatsOfTwoClusters: two clusters' operators share a prefix (--store-shared). Each
// writes a heartbeat of its own, read back with a separate client; when one stops, a caller
// reading that cluster's instances reports its list stale, though the other cluster's
// operator goes on; a caller reading only the live cluster's instances stays fresh.
func TestHeartbeatsOfTwoClusters(t *testing.T) {
	cli, prefix := client(t)
	reader, _ := client(t)
	east, west := writer{"east", "registrar-0"}, writer{"west", "registrar-0"}
	putEndpoint(t, cli, prefix, east.cluster, "web", "web-0", "10.0.0.1")
	putEndpoint(t, cli, prefix, west.cluster, "web", "web-0", "10.1.0.1")
	putEndpoint(t, cli, prefix, west.cluster, "api", "api-0", "10.1.0.2")
	stopEast := runHeartbeat(t, cli, prefix, east)
	runHeartbeat(t, cli, prefix, west)
	eventually(t, 10*time.Second, "a heartbeat of each cluster, read back with a separate client", func() bool {
		m := heartbeatWriters(t, reader, prefix)
		return hasWriter(m, "east/registrar-0") && hasWriter(m, "west/registrar-0")
	})
	web := newCaller(t, reader, prefix, "web")
	api := newCaller(t, reader, prefix, "api")
	eventually(t, 10*time.Second, "both callers fresh while both operators write", func() bool {
		return len(web.All()) == 2 && len(api.All()) == 1 && !web.Stale() && !api.Stale()
	})
	stopEast()
	eventually(t, 10*time.Second, "the caller of east's instances stale once east's operator stops", func() bool {
		f := web.Freshness()
		return f.Stale && f.Reason == "heartbeat"
	})
	if f := api.Freshness(); f.Stale {
		t.Errorf("the caller of west's instances only is stale while west's operator writes: %+v", f)
	}
	runHeartbeat(t, cli, prefix, east)
	eventually(t, 10*time.Second, "fresh again once east's operator writes again", func() bool { return !web.Stale() })
}

// TestHeartbeatsOfTwoReplicas: two replicas of one cluster (--sharding=lease: no leader, each
// runs the heartbeat) write one heartbeat each; one stopping neither hides the other's nor
// makes the cluster's callers stale while the other writes.
func TestHeartbeatsOfTwoReplicas(t *testing.T) {
	cli, prefix := client(t)
	reader, _ := client(t)
	r0, r1 := writer{"east", "registrar-0"}, writer{"east", "registrar-1"}
	putEndpoint(t, cli, prefix, r0.cluster, "web", "web-0", "10.0.0.1")
	stop0 := runHeartbeat(t, cli, prefix, r0)
	runHeartbeat(t, cli, prefix, r1)
	eventually(t, 10*time.Second, "a heartbeat of each replica, read back with a separate client", func() bool {
		m := heartbeatWriters(t, reader, prefix)
		return hasWriter(m, "east/registrar-0") && hasWriter(m, "east/registrar-1")
	})
	web := newCaller(t, reader, prefix, "web")
	eventually(t, 10*time.Second, "the caller fresh", func() bool { return len(web.All()) == 1 && !web.Stale() })
	stop0()
	eventually(t, 10*time.Second, "the stopped replica's heartbeat removed, the other's kept", func() bool {
		m := heartbeatWriters(t, reader, prefix)
		return !hasWriter(m, "east/registrar-0") && hasWriter(m, "east/registrar-1")
	})
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if f := web.Freshness(); f.Stale {
			t.Fatalf("caller stale while a replica of its cluster writes its heartbeat: %+v", f)
		}
	}
}

// newCaller is a pkg/discovery client of service under prefix that judges staleness within
// a second.
func newCaller(t *testing.T, cli *clientv3.Client, prefix, service string) *discovery.Client {
	t.Helper()
	c, err := discovery.New(discovery.Config{Client: cli, Prefix: prefix, Service: service, StaleAfter: time.Second,
		ProbeInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCanariesDoNotDeleteEachOther: two clusters' canaries of one namespace name (x), and two
// replicas' canaries of one cluster, write keys of their own; one stopping (its cleanup)
// leaves the other's key in place, read back with a separate client.
func TestCanariesDoNotDeleteEachOther(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b writer
	}{
		{"two clusters", writer{"east", "registrar-0"}, writer{"west", "registrar-0"}},
		{"two replicas", writer{"east", "registrar-0"}, writer{"east", "registrar-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, prefix := client(t)
			reader, _ := client(t)
			paths := map[writer]*monitor.EtcdPath{}
			for _, w := range []writer{tc.a, tc.b} {
				p, err := monitor.NewEtcdPath(monitor.EtcdPathConfig{KV: cli, Prefix: prefix, Reader: cli,
					Namespace: "x", Cluster: w.cluster, Replica: w.replica})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				paths[w] = p
				c := &monitor.Canary{Store: "etcd-" + t.Name() + w.cluster + w.replica, Path: p, Log: testr.New(t)}
				if err := c.Round(context.Background(), 1, 10*time.Second); err != nil {
					t.Fatalf("round of %v: %v", w, err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := paths[tc.a].Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			resp, err := reader.Get(ctx, wire.CanaryPrefix(prefix), clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, kv := range resp.Kvs {
				keys = append(keys, string(kv.Key))
			}
			if len(keys) != 1 || keys[0] != paths[tc.b].Key() {
				t.Fatalf("canary keys after %v's cleanup: %v, want only %v's %s", tc.a, keys, tc.b, paths[tc.b].Key())
			}
		})
	}
}

// TestDNSCanariesOfTwoReplicas: two replicas' DNS canaries (--sharding=lease with the
// coredns store: every replica runs one) write records of their own, under names of their
// own, so that neither overwrites the other's address nor deletes its record; the name is
// the record's key read as SkyDNS does (labels reversed under the path prefix).
func TestDNSCanariesOfTwoReplicas(t *testing.T) {
	cli, _ := client(t)
	const zone, pathPrefix = "cluster.local", "/skydns"
	a := monitor.NewDNSPath(cli, pathPrefix, zone, "127.0.0.1:53", "c1", "registrar-0")
	b := monitor.NewDNSPath(cli, pathPrefix, zone, "127.0.0.1:53", "c1", "registrar-1")
	if a.Key() == b.Key() || a.Name() == b.Name() {
		t.Fatalf("two replicas' DNS canaries share key %s / %s, name %s / %s", a.Key(), b.Key(), a.Name(), b.Name())
	}
	for _, p := range []*monitor.DNSPath{a, b} {
		labels := strings.Split(strings.TrimSuffix(p.Name(), "."), ".")
		slices.Reverse(labels)
		if want := pathPrefix + "/" + strings.Join(labels, "/"); p.Key() != want {
			t.Errorf("key %s, want %s (the name %s as SkyDNS reads it)", p.Key(), want, p.Name())
		}
		if !strings.HasSuffix(p.Name(), "._canary._registrar."+zone+".") {
			t.Errorf("name %s not under _canary._registrar.%s", p.Name(), zone)
		}
	}
}

// TestCanaryKeyAgesOut: a canary endpoint written under its lease goes when its writer dies
// without cleaning up (the lease is no longer kept alive), and Cleanup removes it at once.
func TestCanaryKeyAgesOut(t *testing.T) {
	cli, prefix := client(t)
	reader, _ := client(t)
	ctx := context.Background()
	newPath := func(replica string) *monitor.EtcdPath {
		p, err := monitor.NewEtcdPath(monitor.EtcdPathConfig{KV: cli, Prefix: prefix, Reader: cli,
			Namespace: "x", Cluster: "east", Replica: replica, Lease: cli, LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		c := &monitor.Canary{Store: "etcd-" + t.Name() + replica, Path: p, Log: testr.New(t)}
		if err := c.Round(ctx, 1, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exists := func(key string) bool {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := reader.Get(gctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Kvs) == 1 && resp.Kvs[0].Lease != 0
	}
	dead, live := newPath("registrar-0"), newPath("registrar-1")
	if !exists(dead.Key()) || !exists(live.Key()) {
		t.Fatal("canary keys not written under a lease")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := live.Cleanup(cctx); err != nil {
		t.Fatal(err)
	}
	if exists(live.Key()) {
		t.Error("canary key kept after Cleanup")
	}
	eventually(t, 15*time.Second, "the dead writer's canary aged out", func() bool { return !exists(dead.Key()) })
}
