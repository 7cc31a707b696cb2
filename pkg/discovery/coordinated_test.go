package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// caller starts a discovery client whose service breaker is coordinated through the store.
func caller(t testing.TB, endpoint, service, id string, br discovery.BreakerConfig, cc discovery.CoordinatedConfig) *discovery.Client {
	t.Helper()
	return callerWithClock(t, endpoint, service, id, br, cc, time.Now)
}

func callerWithClock(t testing.TB, endpoint, service, id string, br discovery.BreakerConfig, cc discovery.CoordinatedConfig, now func() time.Time) *discovery.Client {
	t.Helper()
	cc.CallerID = id
	br.Coordinated = &cc
	c, err := discovery.NewWithClock(discovery.Config{
		Endpoints: []string{endpoint}, Service: service, FailureThreshold: 1000, Breaker: br,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 3 * time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	waitSynced(t, c)
	return c
}

func sharedState(c *discovery.Client) discovery.BreakerState {
	if st := c.BreakerStats().Coordinated; st != nil {
		return st.Shared
	}
	return -1
}

func readState(t testing.TB, cli *clientv3.Client, service string) (discovery.BreakerRecord, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, discovery.BreakerPrefix("", service)+"state")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return discovery.BreakerRecord{}, false
	}
	rec, err := discovery.DecodeBreakerRecord(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return rec, true
}

func countKeys(t testing.TB, cli *clientv3.Client, prefix string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return int(resp.Count)
}

// TestCoordinatedQuorum: one caller whose own calls fail reports, but cannot open the
// fleet's breaker; when a quorum of three callers reports, the shared breaker opens and
// every caller, including those that never failed, rejects calls from its cache, without a
// store round trip.
func TestCoordinatedQuorum(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	d := newDep(t)
	d.register(t, cli, "quorum", "a")
	br := discovery.BreakerConfig{MinCalls: 2, OpenDuration: time.Hour}
	cc := discovery.CoordinatedConfig{Quorum: 3, StoreTimeout: 5 * time.Second}
	var callers []*discovery.Client
	for i := range 5 {
		callers = append(callers, caller(t, srv.Endpoint(), "quorum", fmt.Sprintf("c%d", i), br, cc))
	}
	for _, c := range callers {
		g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	}
	ctx := context.Background()
	faulty := func(context.Context, discovery.Instance) error {
		return errors.New("this caller's own network is broken")
	}

	// One faulty caller: it reports, the breaker stays closed for everyone.
	for range 4 {
		_ = callers[0].Do(ctx, 1, faulty)
	}
	g.Eventually(func() int { return countKeys(t, cli, discovery.BreakerPrefix("", "quorum")+"reports/") }).WithTimeout(eventually).Should(Equal(1))
	g.Consistently(func() bool { _, ok := readState(t, cli, "quorum"); return ok }).WithTimeout(time.Second).Should(BeFalse())
	for _, c := range callers[1:] {
		g.Expect(c.Do(ctx, 1, callHTTP("c"))).To(Succeed())
	}

	// Two more callers see the dependency fail: quorum.
	d.failing.Store(true)
	for _, c := range callers[1:3] {
		for range 2 {
			_ = c.Do(ctx, 1, callHTTP("c"))
		}
	}
	g.Eventually(func() string { rec, _ := readState(t, cli, "quorum"); return rec.State }).WithTimeout(eventually).Should(Equal("Open"))
	for _, c := range callers {
		g.Eventually(func() discovery.BreakerState { return sharedState(c) }).WithTimeout(eventually).Should(Equal(discovery.BreakerOpen))
	}
	hits := d.hits.Load()
	for _, c := range callers[3:] {
		for range 100 {
			g.Expect(c.Do(ctx, 1, callHTTP("c"))).To(MatchError(discovery.ErrBreakerOpen))
		}
		st := c.BreakerStats().Coordinated
		g.Expect(st.StoreWrites).To(BeZero(), "a caller that never failed wrote nothing")
		g.Expect(st.Fallback).To(BeFalse())
	}
	g.Expect(d.hits.Load()).To(Equal(hits), "rejected calls never reached the dependency")
}

// TestCoordinatedOneProbeFleetWide: ten callers hammer a dependency that recovered while the
// shared breaker was open; exactly one probe reaches it, and its success closes the breaker
// for the whole fleet.
func TestCoordinatedOneProbeFleetWide(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	d := newDep(t)
	d.register(t, cli, "oneprobe", "a")
	br := discovery.BreakerConfig{MinCalls: 2, OpenDuration: 500 * time.Millisecond}
	cc := discovery.CoordinatedConfig{Quorum: 2, StoreTimeout: 5 * time.Second}
	var callers []*discovery.Client
	for i := range 10 {
		callers = append(callers, caller(t, srv.Endpoint(), "oneprobe", fmt.Sprintf("c%d", i), br, cc))
	}
	for _, c := range callers {
		g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	}
	d.failing.Store(true)
	ctx := context.Background()
	for _, c := range callers[:2] {
		for range 2 {
			_ = c.Do(ctx, 1, callHTTP("c"))
		}
	}
	for _, c := range callers {
		g.Eventually(func() discovery.BreakerState { return sharedState(c) }).WithTimeout(eventually).Should(Equal(discovery.BreakerOpen))
	}
	d.failing.Store(false) // recovered while open
	before := d.hits.Load()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i, c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				_ = c.Do(ctx, 1, callHTTP(fmt.Sprintf("c%d", i)))
			}
		}()
	}
	for _, c := range callers {
		g.Eventually(func() discovery.BreakerState { return sharedState(c) }).WithTimeout(eventually).Should(Equal(discovery.BreakerClosed))
	}
	g.Eventually(d.hits.Load).WithTimeout(eventually).Should(BeNumerically(">", before+10), "the fleet calls again once closed")
	close(stop)
	wg.Wait()
	g.Expect(d.probes.Load()).To(BeEquivalentTo(1), "one probe for the fleet")
	rec, ok := readState(t, cli, "oneprobe")
	g.Expect(ok).To(BeTrue())
	g.Expect(rec.State).To(Equal("Closed"))
	g.Expect(rec.Reason).To(Equal("probe succeeded"))
	g.Expect(countKeys(t, cli, discovery.BreakerPrefix("", "oneprobe")+"reports/")).To(BeZero(), "closing clears the reports")
	for _, c := range callers {
		g.Expect(c.BreakerStats().Coordinated.Fallbacks).To(BeZero())
	}
}

// TestCoordinatedPermitIsTheLease: a caller whose clock is an hour behind takes the probe
// permit and then hangs in its probe. The store expires the permit with its lease (not by
// anyone's clock); another caller takes it, and the hung caller's late success changes
// nothing.
func TestCoordinatedPermitIsTheLease(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	d := newDep(t)
	d.register(t, cli, "lease", "a")
	br := discovery.BreakerConfig{MinCalls: 2, OpenDuration: 200 * time.Millisecond}
	cc := discovery.CoordinatedConfig{Quorum: 1, StoreTimeout: 5 * time.Second, ProbeLease: 2 * time.Second}
	skewed := callerWithClock(t, srv.Endpoint(), "lease", "skewed", br, cc, func() time.Time { return time.Now().Add(-time.Hour) })
	other := caller(t, srv.Endpoint(), "lease", "other", br, cc)
	for _, c := range []*discovery.Client{skewed, other} {
		g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	}
	d.failing.Store(true)
	ctx := context.Background()
	for range 2 {
		_ = skewed.Do(ctx, 1, callHTTP("skewed"))
	}
	g.Eventually(func() discovery.BreakerState { return sharedState(other) }).WithTimeout(eventually).Should(Equal(discovery.BreakerOpen))

	// The skewed caller probes and hangs, ignoring its context (a paused process).
	release := make(chan struct{})
	var probed atomic.Bool
	hung := make(chan error, 1)
	go func() {
		for !probed.Load() {
			err := skewed.Do(ctx, 1, func(ctx context.Context, inst discovery.Instance) error {
				if discovery.IsProbe(ctx) {
					probed.Store(true)
					<-release
					return nil // it would close the breaker
				}
				return errors.New("not a probe")
			})
			if probed.Load() {
				hung <- err
				return
			}
			time.Sleep(5 * time.Millisecond) // the caller's call rate
		}
	}()
	probeKey := discovery.BreakerPrefix("", "lease") + "probe"
	g.Eventually(probed.Load).WithTimeout(eventually).Should(BeTrue())
	g.Expect(countKeys(t, cli, probeKey)).To(Equal(1))
	took := time.Now()
	g.Eventually(func() int { return countKeys(t, cli, probeKey) }).WithTimeout(eventually).Should(BeZero(), "the lease expired")
	t.Logf("the hung caller's permit expired %s after it was observed", time.Since(took).Round(time.Millisecond))

	// The other caller takes the permit; its probe fails (still down): Open again, by it.
	g.Eventually(func() string {
		_ = other.Do(ctx, 1, callHTTP("other"))
		rec, _ := readState(t, cli, "lease")
		return rec.By + "/" + rec.Reason
	}).WithTimeout(eventually).Should(Equal("other/probe failed"))

	close(release)
	g.Expect(<-hung).To(Succeed())
	g.Consistently(func() string { rec, _ := readState(t, cli, "lease"); return rec.State + " by " + rec.By }).
		WithTimeout(time.Second).Should(Equal("Open by other"), "the late success of a lost permit changed nothing")
}

// TestCoordinatedUndecodableState: values that do not decode are counted and ignored: they
// neither open nor close the breaker.
func TestCoordinatedUndecodableState(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	d := newDep(t)
	d.register(t, cli, "garbage", "a")
	c := caller(t, srv.Endpoint(), "garbage", "c0", discovery.BreakerConfig{OpenDuration: time.Hour}, discovery.CoordinatedConfig{Quorum: 1, StoreTimeout: 5 * time.Second})
	g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	dir := discovery.BreakerPrefix("", "garbage")
	putRaw := func(k, v string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cli.Put(ctx, dir+k, v); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	putRaw("state", `{"state":"Maybe"}`)
	putRaw("reports/x", `not json`)
	g.Eventually(func() int64 { return c.BreakerStats().Coordinated.Undecodable }).WithTimeout(eventually).Should(BeEquivalentTo(2))
	g.Expect(c.Do(ctx, 1, callHTTP("c0"))).To(Succeed(), "garbage does not open the breaker")
	g.Expect(c.BreakerStats().Coordinated.Reports).To(BeZero())

	putRaw("state", `{"state":"Open","openFor":"1h","by":"ops"}`)
	g.Eventually(func() discovery.BreakerState { return sharedState(c) }).WithTimeout(eventually).Should(Equal(discovery.BreakerOpen))
	putRaw("state", `{"state":"Closed","openFor":7}`)
	g.Eventually(func() int64 { return c.BreakerStats().Coordinated.Undecodable }).WithTimeout(eventually).Should(BeEquivalentTo(3))
	g.Expect(c.Do(ctx, 1, callHTTP("c0"))).To(MatchError(discovery.ErrBreakerOpen), "garbage does not close the breaker")
}

// TestCoordinatedStoreOutage: the store becomes unreachable while the shared breaker is
// open. Every caller falls back to its local breaker (which starts Open, as the fleet saw
// it) within one call timeout, no call waits on the store, and the local breakers go on
// probing on their own; when the store returns the callers use the shared state again.
func TestCoordinatedStoreOutage(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	d := newDep(t)
	d.register(t, cli, "outage", "a")
	p := newProxy(t, strings.TrimPrefix(srv.Endpoint(), "http://"))
	const storeTimeout, callTimeout = 500 * time.Millisecond, time.Second
	br := discovery.BreakerConfig{MinCalls: 2, OpenDuration: 2 * time.Second}
	cc := discovery.CoordinatedConfig{Quorum: 2, StoreTimeout: storeTimeout}
	var callers []*discovery.Client
	for i := range 5 {
		callers = append(callers, caller(t, p.URL(), "outage", fmt.Sprintf("c%d", i), br, cc))
	}
	for _, c := range callers {
		g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	}
	d.failing.Store(true)
	ctx := context.Background()
	for _, c := range callers[:2] {
		for range 2 {
			_ = c.Do(ctx, 1, callHTTP("c"))
		}
	}
	for _, c := range callers {
		g.Eventually(func() discovery.BreakerState { return sharedState(c) }).WithTimeout(eventually).Should(Equal(discovery.BreakerOpen))
	}

	p.Block()
	blocked := time.Now()
	var wg sync.WaitGroup
	fellBack := make([]time.Duration, len(callers))
	slowest := make([]time.Duration, len(callers))
	for i, c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(blocked) < 3*time.Second {
				start := time.Now()
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				_ = c.Do(cctx, 1, callHTTP("c"))
				cancel()
				slowest[i] = max(slowest[i], time.Since(start))
				if fellBack[i] == 0 && c.BreakerStats().Coordinated.Fallback {
					fellBack[i] = time.Since(blocked)
				}
				time.Sleep(5 * time.Millisecond) // the caller's call rate
			}
		}()
	}
	wg.Wait()
	for i := range callers {
		t.Logf("caller %d: fell back to local after %s; slowest call %s", i, fellBack[i].Round(time.Millisecond), slowest[i].Round(time.Millisecond))
		g.Expect(fellBack[i]).To(BeNumerically(">", 0), "caller %d fell back", i)
		g.Expect(fellBack[i]).To(BeNumerically("<=", callTimeout), "caller %d fell back within one call timeout", i)
		g.Expect(slowest[i]).To(BeNumerically("<", storeTimeout), "no call waited on the store")
		st := callers[i].BreakerStats()
		g.Expect(st.Coordinated.Fallbacks).To(BeNumerically(">=", 1))
	}
	// The local breakers started Open and probed on their own: at most a few probes each
	// in 3 s with a 2 s ±20 % open duration.
	g.Expect(d.probes.Load()).To(BeNumerically("<=", 2*len(callers)))

	p.Unblock()
	for _, c := range callers {
		g.Eventually(func() bool { return c.BreakerStats().Coordinated.Fallback }).WithTimeout(eventually).Should(BeFalse())
	}
}

// TestCoordinatedIdleStoreStaysShared: on a store nobody writes to, the caller's progress
// requests still answer, so it keeps deciding calls from the shared state: it does not fall
// back to its local breaker every StoreTimeout, nor list again every 2×StoreTimeout.
func TestCoordinatedIdleStoreStaysShared(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	storeClient(t, srv)
	const storeTimeout = time.Second
	c := caller(t, srv.Endpoint(), "idle", "c0", discovery.BreakerConfig{}, discovery.CoordinatedConfig{Quorum: 1, StoreTimeout: storeTimeout})
	g.Eventually(func() bool { return c.BreakerStats().Coordinated.Fallback }).WithTimeout(eventually).Should(BeFalse())
	g.Consistently(func() int64 { return c.BreakerStats().Coordinated.Fallbacks }).WithTimeout(4 * storeTimeout).Should(BeZero())
}
