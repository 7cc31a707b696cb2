package discovery_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// doRecover runs c.Do and returns what it panicked with (nil when it returned) and its error.
func doRecover(c *discovery.Client, attempts int, fn func(context.Context, discovery.Instance) error) (p any, err error) {
	defer func() { p = recover() }()
	return nil, c.Do(context.Background(), attempts, fn)
}

// errProbePanic is what the panicking probes of these tests panic with.
var errProbePanic = errors.New("the caller's code panicked in a probe")

// panicOnProbe panics in a half-open probe and otherwise calls the dependency.
func panicOnProbe(caller string) func(context.Context, discovery.Instance) error {
	return func(ctx context.Context, inst discovery.Instance) error {
		if discovery.IsProbe(ctx) {
			panic(errProbePanic)
		}
		return callHTTP(caller)(ctx, inst)
	}
}

// TestDoServiceProbePanics: the service's half-open probe panics. The panic reaches the
// caller unchanged, the probe counts as failed (Open again), and the next probe after the
// open duration goes through: the permit was given back.
func TestDoServiceProbePanics(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	d := newDep(t)
	d.failing.Store(true)
	d.register(t, cli, "panic-svc", "a")
	var clk clock
	c, err := discovery.NewWithClock(discovery.Config{
		Endpoints: []string{srv.Endpoint()}, Service: "panic-svc", FailureThreshold: 1000,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 3 * time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second,
		Breaker: discovery.BreakerConfig{MinCalls: 2, OpenDuration: time.Minute},
	}, clk.now)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	waitSynced(t, c)
	g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	for range 2 {
		g.Expect(c.Do(context.Background(), 1, callHTTP("t"))).NotTo(Succeed())
	}
	g.Expect(c.BreakerStats().Service.State).To(Equal(discovery.BreakerOpen))

	d.failing.Store(false)
	clk.advance(2 * time.Minute)
	p, _ := doRecover(c, 1, panicOnProbe("t"))
	g.Expect(p).To(Equal(errProbePanic), "the probe's panic reaches the caller unchanged")
	g.Expect(c.BreakerStats().Service.State).To(Equal(discovery.BreakerOpen), "a probe that panicked failed")
	g.Expect(c.Do(context.Background(), 1, callHTTP("t"))).To(MatchError(discovery.ErrBreakerOpen), "open for another open duration")

	clk.advance(2 * time.Minute)
	g.Expect(c.Do(context.Background(), 1, callHTTP("t"))).To(Succeed(), "the next probe went through")
	g.Expect(c.BreakerStats().Service.State).To(Equal(discovery.BreakerClosed))
	g.Expect(d.probes.Load()).To(BeEquivalentTo(1))
}

// TestDoEndpointProbePanics: an endpoint breaker's half-open probe panics; the endpoint's
// permit is given back (the probe failed) and a later probe closes it.
func TestDoEndpointProbePanics(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	good, bad := newDep(t), newDep(t)
	bad.failing.Store(true)
	good.register(t, cli, "panic-ep", "a")
	bad.register(t, cli, "panic-ep", "b")
	var clk clock
	c, err := discovery.NewWithClock(discovery.Config{
		Endpoints: []string{srv.Endpoint()}, Service: "panic-ep", FailureThreshold: 1000,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 3 * time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second,
		// Above 0.5: a's success and b's panicking probe do not open the service's breaker
		// (which would close b's).
		Breaker: discovery.BreakerConfig{MinCalls: 2, OpenDuration: time.Minute, FailureRateThreshold: 0.6},
	}, clk.now)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	waitSynced(t, c)
	g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(2))
	var badInst discovery.Instance
	for _, inst := range c.All() {
		if inst.Pod == "b" {
			badInst = inst
		}
	}
	for range 10 {
		g.Expect(c.Do(context.Background(), 2, callHTTP("t"))).To(Succeed())
	}
	g.Expect(c.BreakerState(badInst)).To(Equal(discovery.BreakerOpen))

	bad.failing.Store(false)
	clk.advance(2 * time.Minute)
	panicked := false
	for i := 0; i < 10 && !panicked; i++ { // round robin reaches b within two calls
		p, _ := doRecover(c, 2, panicOnProbe("t"))
		if p != nil {
			g.Expect(p).To(Equal(errProbePanic))
			panicked = true
		}
	}
	g.Expect(panicked).To(BeTrue(), "b was probed")
	g.Expect(c.BreakerState(badInst)).To(Equal(discovery.BreakerOpen), "a probe that panicked failed")

	clk.advance(2 * time.Minute)
	g.Eventually(func() discovery.BreakerState {
		g.Expect(c.Do(context.Background(), 2, callHTTP("t"))).To(Succeed())
		return c.BreakerState(badInst)
	}).WithTimeout(eventually).Should(Equal(discovery.BreakerClosed), "the next probe of b went through")
	g.Expect(bad.probes.Load()).To(BeEquivalentTo(1))
}

// TestCoordinatedProbePanics: the caller holding the fleet's probe permit panics in its
// probe. The panic reaches the caller, the permit is settled as a failed probe (Open again,
// by that caller), and a later probe of the same caller closes the shared breaker.
func TestCoordinatedProbePanics(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	d := newDep(t)
	d.register(t, cli, "panic-co", "a")
	br := discovery.BreakerConfig{MinCalls: 2, OpenDuration: 200 * time.Millisecond}
	cc := discovery.CoordinatedConfig{Quorum: 1, StoreTimeout: 5 * time.Second, ProbeLease: 2 * time.Second}
	c := caller(t, srv.Endpoint(), "panic-co", "c0", br, cc)
	g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	d.failing.Store(true)
	// Calls until the shared state is Open: a call the caller decides with its local
	// breaker (before its first read of the shared state) reports nothing.
	g.Eventually(func() discovery.BreakerState {
		_ = c.Do(context.Background(), 1, callHTTP("c0"))
		return sharedState(c)
	}).WithTimeout(eventually).WithPolling(20 * time.Millisecond).Should(Equal(discovery.BreakerOpen))
	d.failing.Store(false)
	probes := d.probes.Load() // a local probe may have gone out before the first read

	g.Eventually(func() any {
		p, err := doRecover(c, 1, panicOnProbe("c0"))
		g.Expect(err).To(Or(BeNil(), MatchError(discovery.ErrBreakerOpen)))
		return p
	}).WithTimeout(eventually).WithPolling(5 * time.Millisecond).Should(Equal(errProbePanic))
	state := func() string {
		rec, _ := readState(t, cli, "panic-co")
		return rec.State + " by " + rec.By + ": " + rec.Reason
	}
	g.Eventually(state).WithTimeout(eventually).Should(Equal("Open by c0: probe failed"), "the panicked probe was settled as failed")

	g.Eventually(func() string {
		_ = c.Do(context.Background(), 1, callHTTP("c0"))
		return state()
	}).WithTimeout(eventually).WithPolling(20*time.Millisecond).Should(Equal("Closed by c0: probe succeeded"), "a later probe went through")
	g.Expect(d.probes.Load() - probes).To(BeEquivalentTo(1))
}
