package discovery_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// echoTap sits between a caller's real etcd client and the store, on the caller's breaker
// keys only: once armed, it keeps the caller's breaker watch from delivering the caller's
// own probe permit (the echo of its acquire). With end it ends the watch at that event (the
// watch dropped before the caller saw its permit) and holds the caller's next listing of its
// breaker keys until release is closed; without, it swallows just that event and the watch
// goes on.
type echoTap struct {
	dir, caller string
	end         bool
	armed       atomic.Bool
	holding     atomic.Bool
	dropped     chan struct{} // closed when the echo was kept from the caller
	release     chan struct{}
}

func newEchoTap(service, caller string, end bool) *echoTap {
	return &echoTap{dir: discovery.BreakerPrefix("", service), caller: caller, end: end,
		dropped: make(chan struct{}), release: make(chan struct{})}
}

func (t *echoTap) isEcho(ev *clientv3.Event) bool {
	return ev.Type == mvccpb.PUT && string(ev.Kv.Key) == t.dir+"probe" &&
		strings.Contains(string(ev.Kv.Value), `"caller":"`+t.caller+`"`)
}

type tapWatcher struct {
	clientv3.Watcher
	t *echoTap
}

func (w tapWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := w.Watcher.Watch(ctx, key, opts...)
	if key != w.t.dir {
		return in
	}
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for wr := range in {
			if w.t.armed.Load() {
				var kept []*clientv3.Event
				for _, ev := range wr.Events {
					if !w.t.isEcho(ev) {
						kept = append(kept, ev)
					}
				}
				if len(kept) < len(wr.Events) && w.t.armed.CompareAndSwap(true, false) {
					if w.t.end {
						w.t.holding.Store(true)
						close(w.t.dropped)
						return // the watch ends here: the caller never sees its permit on it
					}
					wr.Events = kept
					close(w.t.dropped)
				}
			}
			select {
			case out <- wr:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

type tapKV struct {
	clientv3.KV
	t *echoTap
}

func (k tapKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if key == k.t.dir && k.t.holding.Load() {
		select {
		case <-k.t.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return k.KV.Get(ctx, key, opts...)
}

// tappedCaller is a coordinated caller whose etcd client goes through tap.
func tappedCaller(t *testing.T, srvEndpoint, service, id string, br discovery.BreakerConfig, cc discovery.CoordinatedConfig, tap *echoTap) *discovery.Client {
	t.Helper()
	cli, err := clientv3New(srvEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	cli.Watcher = tapWatcher{Watcher: cli.Watcher, t: tap}
	cli.KV = tapKV{KV: cli.KV, t: tap}
	cc.CallerID = id
	br.Coordinated = &cc
	c, err := discovery.New(discovery.Config{
		Client: cli, Service: service, FailureThreshold: 1000, Breaker: br,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 3 * time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	waitSynced(t, c)
	return c
}

// openAndDropEcho opens service's shared breaker through c (quorum 1), lets the dependency
// recover and calls until c took the probe permit and tap kept the echo from it.
func openAndDropEcho(t *testing.T, g *WithT, c *discovery.Client, d *dep, tap *echoTap) {
	t.Helper()
	g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	d.failing.Store(true)
	// Calls until the shared state is Open: a call the caller decides with its local
	// breaker (before its first read of the shared state) reports nothing.
	g.Eventually(func() discovery.BreakerState {
		_ = c.Do(context.Background(), 1, callHTTP(tap.caller))
		return sharedState(c)
	}).WithTimeout(eventually).WithPolling(20 * time.Millisecond).Should(Equal(discovery.BreakerOpen))
	d.failing.Store(false)
	tap.armed.Store(true)
	g.Eventually(func() bool {
		_ = c.Do(context.Background(), 1, callHTTP(tap.caller))
		select {
		case <-tap.dropped:
			return true
		default:
			return false
		}
	}).WithTimeout(eventually).WithPolling(5 * time.Millisecond).Should(BeTrue())
}

// permitOf reads the probe permit of service: its holder and lease (0 when none).
func permitOf(t *testing.T, cli *clientv3.Client, service string) (string, clientv3.LeaseID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, discovery.BreakerPrefix("", service)+"probe")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0
	}
	return string(resp.Kvs[0].Value), clientv3.LeaseID(resp.Kvs[0].Lease)
}

// closedBy makes one call through c and reads who last set the shared state, and why.
func closedBy(t *testing.T, c *discovery.Client, cli *clientv3.Client, service string) func() string {
	return func() string {
		_ = c.Do(context.Background(), 1, callHTTP("c0"))
		rec, _ := readState(t, cli, service)
		return rec.State + " by " + rec.By + ": " + rec.Reason
	}
}

// TestCoordinatedWatchDropsBeforeOwnPermit: a caller's acquire of the probe permit commits,
// but its watch drops before the caller sees its permit. When the watch comes back, the
// caller reconciles with what the store holds: its permit still there, it probes under it;
// gone (here revoked while the caller was cut off, as an expiry would), it acquires again.
// Either way the dependency, which recovered, gets its probe and the breaker closes.
func TestCoordinatedWatchDropsBeforeOwnPermit(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone bool
	}{{"permit kept", false}, {"permit gone", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := requireServer(t)
			cli := storeClient(t, srv)
			service := "echo-" + strings.ReplaceAll(tc.name, " ", "-")
			d := newDep(t)
			d.register(t, cli, service, "a")
			tap := newEchoTap(service, "c0", true)
			br := discovery.BreakerConfig{MinCalls: 2, OpenDuration: 200 * time.Millisecond}
			cc := discovery.CoordinatedConfig{Quorum: 1, StoreTimeout: 5 * time.Second, ProbeLease: 30 * time.Second}
			c := tappedCaller(t, srv.Endpoint(), service, "c0", br, cc, tap)
			openAndDropEcho(t, g, c, d, tap)

			holder, lease := permitOf(t, cli, service)
			g.Expect(holder).To(ContainSubstring(`"caller":"c0"`), "the acquire committed")
			if tc.gone {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := cli.Revoke(ctx, lease)
				cancel()
				g.Expect(err).NotTo(HaveOccurred())
				_, lease = permitOf(t, cli, service)
				g.Expect(lease).To(BeZero())
			}
			close(tap.release)
			g.Eventually(closedBy(t, c, cli, service)).WithTimeout(eventually).WithPolling(20*time.Millisecond).
				Should(Equal("Closed by c0: probe succeeded"), "the caller probed again, through the shared breaker")
		})
	}
}

// TestCoordinatedOwnPermitEchoTimeout: a caller's acquire commits but its watch, which goes
// on answering, never delivers the caller's permit. Within about StoreTimeout the caller
// stops waiting for its echo, lists its breaker keys again, finds its permit and probes
// under it, long before the permit's lease would expire.
func TestCoordinatedOwnPermitEchoTimeout(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	d := newDep(t)
	d.register(t, cli, "echo-timeout", "a")
	tap := newEchoTap("echo-timeout", "c0", false)
	br := discovery.BreakerConfig{MinCalls: 2, OpenDuration: 200 * time.Millisecond}
	const storeTimeout, probeLease = time.Second, 30 * time.Second
	cc := discovery.CoordinatedConfig{Quorum: 1, StoreTimeout: storeTimeout, ProbeLease: probeLease}
	c := tappedCaller(t, srv.Endpoint(), "echo-timeout", "c0", br, cc, tap)
	openAndDropEcho(t, g, c, d, tap)
	dropped := time.Now()
	g.Eventually(closedBy(t, c, cli, "echo-timeout")).WithTimeout(probeLease/2).WithPolling(20*time.Millisecond).
		Should(Equal("Closed by c0: probe succeeded"), "the caller probed under its permit, through the shared breaker")
	t.Logf("probed %s after the echo was swallowed", time.Since(dropped).Round(time.Millisecond))
}
