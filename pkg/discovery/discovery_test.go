package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

const eventually = 60 * time.Second // generous: the machine is shared and busy

// TestSnapshotUnderConcurrentChurn writes and deletes keys from several goroutines while
// others pick and list; every snapshot a reader sees is sorted and duplicate-free, and the
// final list equals the store's keys.
func TestSnapshotUnderConcurrentChurn(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "churn"})
	waitSynced(t, c)

	stop := make(chan struct{})
	var readers sync.WaitGroup
	var bad atomic.Value
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				all := c.All()
				keys := make([]string, len(all))
				for i, inst := range all {
					keys[i] = inst.Key
				}
				if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
					bad.Store(fmt.Sprintf("snapshot not sorted/unique: %v", keys))
				}
				if inst, err := c.Pick(); err == nil && inst.Address == "" {
					bad.Store("picked an instance without address")
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for w := range 6 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 30 {
				pod := fmt.Sprintf("w%d-p%02d", w, i%10)
				if i%3 == 2 {
					del(t, cli, "churn", pod)
				} else {
					put(t, cli, "churn", pod, fmt.Sprintf("10.0.%d.%d", w, i))
				}
			}
		}()
	}
	writers.Wait()

	resp, err := cli.Get(context.Background(), discovery.ServicePrefix("", "churn"), clientv3WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	var want []string
	for _, kv := range resp.Kvs {
		want = append(want, string(kv.Key))
	}
	g.Eventually(func() []string {
		var got []string
		for _, inst := range c.All() {
			got = append(got, inst.Key)
		}
		return got
	}).WithTimeout(eventually).Should(Equal(want))
	g.Expect(c.Stats().Revision).To(BeNumerically(">=", resp.Header.Revision))
	close(stop)
	readers.Wait()
	g.Expect(bad.Load()).To(BeNil())
}

// TestLastKnownGoodWhileStoreStopped stops etcd: the client keeps serving the last list and
// reports its growing age; when etcd returns the client catches up.
func TestLastKnownGoodWhileStoreStopped(t *testing.T) {
	g := NewWithT(t)
	requireServer(t)
	srv, err := etcdtest.Start(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(srv.Stop)
	cli := storeClient(t, srv)
	for i := range 3 {
		put(t, cli, "lkg", fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.0.%d", i))
	}
	var reconnects atomic.Int64
	c := newClient(t, discovery.Config{
		Endpoints: []string{srv.Endpoint()}, Service: "lkg", ProbeTimeout: time.Second,
		OnReconnect: func(discovery.Reconnect) { reconnects.Add(1) },
	})
	waitSynced(t, c)
	g.Expect(pods(c)).To(Equal([]string{"p0", "p1", "p2"}))
	g.Eventually(c.Connected).WithTimeout(eventually).Should(BeTrue())

	srv.Stop()
	g.Eventually(c.Connected).WithTimeout(eventually).Should(BeFalse())
	g.Eventually(c.Staleness).WithTimeout(eventually).Should(BeNumerically(">", 2*time.Second))
	g.Expect(pods(c)).To(Equal([]string{"p0", "p1", "p2"}), "the last known-good list is still served")
	inst, err := c.Pick()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inst.Address).To(HavePrefix("10.0.0."))
	g.Expect(reconnects.Load()).To(BeNumerically(">=", 1))
	lastSync := c.LastSync()
	g.Expect(time.Since(lastSync)).To(BeNumerically(">", 2*time.Second))

	g.Expect(srv.Resume()).To(Succeed())
	put(t, cli, "lkg", "p3", "10.0.0.3")
	del(t, cli, "lkg", "p0")
	g.Eventually(func() []string { return pods(c) }).WithTimeout(eventually).Should(Equal([]string{"p1", "p2", "p3"}))
	g.Eventually(c.Connected).WithTimeout(eventually).Should(BeTrue())
	g.Eventually(c.Staleness).WithTimeout(eventually).Should(BeNumerically("<", 2*time.Second))
	g.Expect(c.LastSync()).To(BeTemporally(">", lastSync))
}

// TestWatchResume partitions the client from etcd with a proxy while the store changes:
// without compaction the watch resumes from the last revision (no second list); after a
// compaction past that revision the client lists again.
func TestWatchResume(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	put(t, cli, "resume", "a", "10.1.0.1")
	put(t, cli, "resume", "b", "10.1.0.2")
	p := newProxy(t, strings.TrimPrefix(srv.Endpoint(), "http://"))
	c := newClient(t, discovery.Config{Endpoints: []string{p.URL()}, Service: "resume", ProbeTimeout: time.Second, OnReconnect: func(r discovery.Reconnect) { t.Logf("reconnect %+v", r) }})
	waitSynced(t, c)
	g.Expect(pods(c)).To(Equal([]string{"a", "b"}))
	g.Expect(c.Stats().Lists).To(Equal(int64(1)))

	partition := func(change func()) {
		t.Helper()
		g.Eventually(c.Connected).WithTimeout(eventually).Should(BeTrue())
		p.Block()
		g.Eventually(c.Connected).WithTimeout(eventually).Should(BeFalse())
		change()
		p.Unblock()
	}

	// Resume: the events missed during the partition arrive from the last revision.
	partition(func() { put(t, cli, "resume", "c", "10.1.0.3") })
	g.Eventually(func() []string { return pods(c) }).WithTimeout(eventually).Should(Equal([]string{"a", "b", "c"}))
	g.Expect(c.Stats().Lists).To(Equal(int64(1)), "a resume, not a relist")
	g.Expect(c.Stats().Resumes).To(BeNumerically(">=", 1))

	// Compaction: the revision to resume from is gone, so the client lists again.
	partition(func() {
		del(t, cli, "resume", "a")
		put(t, cli, "resume", "d", "10.1.0.4")
		resp, err := cli.Get(context.Background(), "compact-marker")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cli.Compact(context.Background(), resp.Header.Revision)
		g.Expect(err).NotTo(HaveOccurred())
	})
	g.Eventually(func() []string { return pods(c) }).WithTimeout(eventually).Should(Equal([]string{"b", "c", "d"}))
	g.Expect(c.Stats().Lists).To(Equal(int64(2)), "the compacted revision forced a full relist")
	g.Eventually(c.Connected).WithTimeout(eventually).Should(BeTrue())
}

// TestReconnectJitterSpreads cuts 100 clients off the store at once and checks that the
// reconnect delays they compute are spread over the backoff window, not bunched.
func TestReconnectJitterSpreads(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	p := newProxy(t, strings.TrimPrefix(srv.Endpoint(), "http://"))
	shared, err := clientv3New(p.URL())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = shared.Close() })

	const clients, base = 100, 10 * time.Second // long base: nobody reconnects during the test
	var mu sync.Mutex
	first := map[int]time.Duration{}
	var all []*discovery.Client
	for i := range clients {
		c := newClient(t, discovery.Config{
			Client: shared, Service: "herd", ProbeTimeout: time.Second, BackoffBase: base, BackoffMax: time.Minute,
			OnReconnect: func(r discovery.Reconnect) {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := first[i]; !ok && r.Attempt == 0 {
					first[i] = r.Delay
				}
			},
		})
		all = append(all, c)
	}
	for _, c := range all {
		waitSynced(t, c)
		g.Eventually(c.Connected).WithTimeout(eventually).Should(BeTrue())
	}
	p.Block()
	g.Eventually(func() int { mu.Lock(); defer mu.Unlock(); return len(first) }).WithTimeout(eventually).Should(Equal(clients))

	mu.Lock()
	defer mu.Unlock()
	var buckets [10]int
	lo, hi := base, time.Duration(0)
	for _, d := range first {
		g.Expect(d).To(And(BeNumerically(">=", 0), BeNumerically("<", base)))
		buckets[int(d*10/base)]++
		lo, hi = min(lo, d), max(hi, d)
	}
	t.Logf("first reconnect delays of %d clients: min %s, max %s, per tenth of the window %v", clients, lo, hi, buckets)
	g.Expect(hi-lo).To(BeNumerically(">", base/2), "delays spread over most of the window")
	for i, n := range buckets {
		// Uniform: 10 expected per tenth; more than 30 has probability below 1e-7.
		g.Expect(n).To(BeNumerically("<=", 30), "tenth %d of the window holds %d of %d reconnects", i, n, clients)
	}
}

// TestEjectionCap ejects reported instances, never more than MaxEjectionPercent of them,
// never a lone instance, and lets them back after the cool-down.
func TestEjectionCap(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	for i := range 4 {
		put(t, cli, "eject", fmt.Sprintf("p%d", i), fmt.Sprintf("10.2.0.%d", i))
	}
	c := newClient(t, discovery.Config{
		Endpoints: []string{srv.Endpoint()}, Service: "eject", MaxEjectionPercent: 50, EjectionTime: 30 * time.Second,
	})
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	discovery.SetClock(c, func() time.Time { return time.Unix(0, clock.Load()) })
	waitSynced(t, c)
	all := c.All()
	g.Expect(all).To(HaveLen(4))
	var ejected []bool
	for _, inst := range all {
		ejected = append(ejected, c.ReportFailure(inst))
	}
	g.Expect(ejected).To(Equal([]bool{true, true, false, false}), "50%% of 4: two ejections, then the cap")
	g.Expect(c.Stats().Ejected).To(Equal(2))
	for range 100 {
		inst, err := c.Pick()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(inst.Pod).To(BeElementOf("p2", "p3"))
	}
	// The list shrinks to two: only one of the two ejected may stay ejected.
	del(t, cli, "eject", "p2")
	del(t, cli, "eject", "p3")
	g.Eventually(func() []string { return pods(c) }).WithTimeout(eventually).Should(Equal([]string{"p0", "p1"}))
	g.Expect(c.Stats().Ejected).To(Equal(1))
	inst, err := c.Pick()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inst.Pod).To(Equal("p1"))
	// After the cool-down everything is back in rotation.
	clock.Add(int64(29 * time.Second))
	g.Expect(c.Stats().Ejected).To(Equal(1))
	clock.Add(int64(2 * time.Second))
	g.Expect(c.Stats().Ejected).To(BeZero())

	// A lone instance is never ejected.
	del(t, cli, "eject", "p1")
	g.Eventually(func() []string { return pods(c) }).WithTimeout(eventually).Should(Equal([]string{"p0"}))
	g.Expect(c.ReportFailure(c.All()[0])).To(BeFalse())
}

func TestFailureThreshold(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	put(t, cli, "threshold", "a", "10.3.0.1")
	put(t, cli, "threshold", "b", "10.3.0.2")
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "threshold", FailureThreshold: 3})
	waitSynced(t, c)
	a := c.All()[0]
	g.Expect(c.ReportFailure(a)).To(BeFalse())
	g.Expect(c.ReportFailure(a)).To(BeFalse())
	c.ReportSuccess(a) // resets the run of failures
	g.Expect(c.ReportFailure(a)).To(BeFalse())
	g.Expect(c.ReportFailure(a)).To(BeFalse())
	g.Expect(c.ReportFailure(a)).To(BeTrue())
	g.Expect(c.Ejected(a)).To(BeTrue())
}

// TestRoundRobinFairness checks that round-robin gives every instance the same share, from
// concurrent callers, before and after the list changes.
func TestRoundRobinFairness(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	for _, p := range []string{"d", "b", "a", "c"} { // written out of order: the list is sorted
		put(t, cli, "rr", p, "10.4.0."+p)
	}
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "rr"})
	waitSynced(t, c)
	g.Expect(pods(c)).To(Equal([]string{"a", "b", "c", "d"}))

	counts := func(picks int) map[string]int {
		var mu sync.Mutex
		got := map[string]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range picks / 8 {
					inst, err := c.Pick()
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					got[inst.Pod]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return got
	}
	g.Expect(counts(800)).To(Equal(map[string]int{"a": 200, "b": 200, "c": 200, "d": 200}))

	put(t, cli, "rr", "e", "10.4.0.e")
	put(t, cli, "rr", "f", "10.4.0.f")
	del(t, cli, "rr", "b")
	g.Eventually(func() []string { return pods(c) }).WithTimeout(eventually).Should(Equal([]string{"a", "c", "d", "e", "f"}))
	g.Expect(counts(1000)).To(Equal(map[string]int{"a": 200, "c": 200, "d": 200, "e": 200, "f": 200}))
}

// TestRoundRobinCounterOverflow picks across the wrap of the counter: indexing stays in
// range (floorMod) and every instance keeps being picked.
func TestRoundRobinCounterOverflow(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	for _, p := range []string{"a", "b", "c"} {
		put(t, cli, "overflow", p, "10.9.0."+p)
	}
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "overflow"})
	waitSynced(t, c)
	discovery.SetRoundRobinCounter(c, math.MaxInt64-4)
	seen := map[string]int{}
	for range 30 {
		inst, err := c.Pick()
		g.Expect(err).NotTo(HaveOccurred())
		seen[inst.Pod]++
	}
	g.Expect(seen).To(HaveLen(3))
	for _, n := range seen {
		g.Expect(n).To(BeNumerically("~", 10, 1))
	}
}

func TestLeastRecentlyFailed(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	for _, p := range []string{"a", "b", "c"} {
		put(t, cli, "lrf", p, "10.5.0."+p)
	}
	c := newClient(t, discovery.Config{
		Endpoints: []string{srv.Endpoint()}, Service: "lrf", Strategy: discovery.LeastRecentlyFailed, FailureThreshold: 100,
	})
	waitSynced(t, c)
	byPod := map[string]discovery.Instance{}
	for _, inst := range c.All() {
		byPod[inst.Pod] = inst
	}
	c.ReportFailure(byPod["a"])
	seen := map[string]int{}
	for range 10 {
		inst, err := c.Pick()
		g.Expect(err).NotTo(HaveOccurred())
		seen[inst.Pod]++
	}
	g.Expect(seen).To(Equal(map[string]int{"b": 5, "c": 5}), "never-failed instances take turns; a failed recently")
	c.ReportFailure(byPod["b"])
	c.ReportFailure(byPod["c"])
	inst, err := c.Pick()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inst.Pod).To(Equal("a"), "a's failure is now the oldest")
}

func TestRandomPicksEveryInstance(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	for _, p := range []string{"a", "b", "c"} {
		put(t, cli, "random", p, "10.6.0."+p)
	}
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "random", Strategy: discovery.Random})
	waitSynced(t, c)
	seen := map[string]int{}
	for range 300 {
		inst, err := c.Pick()
		g.Expect(err).NotTo(HaveOccurred())
		seen[inst.Pod]++
	}
	g.Expect(seen).To(HaveLen(3)) // each has probability (2/3)^300 of never being picked
}

// TestDoTriesDifferentInstances fails a call on every instance but the last one tried.
func TestDoTriesDifferentInstances(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	for _, p := range []string{"a", "b", "c"} {
		put(t, cli, "retry", p, "10.7.0."+p)
	}
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "retry", FailureThreshold: 100})
	waitSynced(t, c)
	ctx := context.Background()

	var tried []string
	err := c.Do(ctx, 3, func(_ context.Context, inst discovery.Instance) error {
		tried = append(tried, inst.Pod)
		if len(tried) < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tried).To(ConsistOf("a", "b", "c"), "each attempt on a different instance")

	tried = nil
	err = c.Do(ctx, 5, func(_ context.Context, inst discovery.Instance) error {
		tried = append(tried, inst.Pod)
		return errors.New("boom")
	})
	g.Expect(err).To(MatchError(ContainSubstring("3 attempt(s) failed")))
	g.Expect(tried).To(HaveLen(3), "never the same instance twice")

	tried = nil
	errBad := errors.New("400 bad request")
	err = c.Do(ctx, 3, func(_ context.Context, inst discovery.Instance) error {
		tried = append(tried, inst.Pod)
		return discovery.Permanent(errBad)
	})
	g.Expect(err).To(MatchError(errBad))
	g.Expect(tried).To(HaveLen(1))

	empty := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "nobody"})
	waitSynced(t, empty)
	g.Expect(empty.Do(ctx, 3, func(context.Context, discovery.Instance) error { return nil })).To(MatchError(discovery.ErrNoInstances))
}

// TestSubscription reads adds, removes and updates through a subscription.
func TestSubscription(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	put(t, cli, "subs", "a", "10.8.0.1")
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "subs"})
	sub := c.Subscribe()
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()

	// next skips changes of the connection state alone.
	next := func() discovery.Change {
		t.Helper()
		for {
			ch, err := sub.Next(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			if len(ch.Added)+len(ch.Removed)+len(ch.Updated) > 0 {
				return ch
			}
		}
	}
	names := func(list []discovery.Instance) []string {
		var out []string
		for _, inst := range list {
			out = append(out, inst.Pod)
		}
		return out
	}
	ch := next()
	g.Expect(names(ch.Added)).To(Equal([]string{"a"}))

	put(t, cli, "subs", "b", "10.8.0.2")
	ch = next()
	g.Expect(names(ch.Added)).To(Equal([]string{"b"}))
	g.Expect(names(ch.Instances)).To(Equal([]string{"a", "b"}))

	put(t, cli, "subs", "a", "10.8.0.9")
	ch = next()
	g.Expect(names(ch.Updated)).To(Equal([]string{"a"}))
	g.Expect(ch.Updated[0].Address).To(Equal("10.8.0.9"))

	del(t, cli, "subs", "b")
	ch = next()
	g.Expect(names(ch.Removed)).To(Equal([]string{"b"}))
	g.Expect(ch.Removed[0].Address).To(Equal("10.8.0.2"))

	sub.Close()
	_, err := sub.Next(ctx)
	g.Expect(err).To(MatchError(discovery.ErrClosed))
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	g := NewWithT(t)
	_, err := discovery.New(discovery.Config{Endpoints: []string{"http://127.0.0.1:1"}})
	g.Expect(err).To(MatchError(ContainSubstring("Service is required")))
	_, err = discovery.New(discovery.Config{Service: "x"})
	g.Expect(err).To(MatchError(ContainSubstring("Endpoints or Config.Client")))
}

func TestHostPort(t *testing.T) {
	tests := []struct {
		name  string
		ports map[string]int32
		port  string
		want  string
		ok    bool
	}{
		{"named", map[string]int32{"http": 80, "grpc": 90}, "grpc", "10.0.0.1:90", true},
		{"only port", map[string]int32{"web": 80}, "", "10.0.0.1:80", true},
		{"http among several", map[string]int32{"http": 80, "grpc": 90}, "", "10.0.0.1:80", true},
		{"ambiguous", map[string]int32{"a": 80, "b": 90}, "", "", false},
		{"missing", map[string]int32{"http": 80}, "grpc", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := discovery.Instance{Endpoint: wire.Endpoint{Address: "10.0.0.1", Ports: tt.ports}}.HostPort(tt.port)
			if got != tt.want || ok != tt.ok {
				t.Errorf("HostPort(%q) = %q, %v; want %q, %v", tt.port, got, ok, tt.want, tt.ok)
			}
		})
	}
	if got, _ := (discovery.Instance{Endpoint: wire.Endpoint{Address: "fd00::1", Ports: map[string]int32{"http": 80}}}).HostPort(""); got != "[fd00::1]:80" {
		t.Errorf("IPv6 HostPort = %q", got)
	}
}
