package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// dep is a real HTTP dependency whose answers the test switches: 200 or 503. It counts the
// requests it got, and the probes among them (the caller marks them with X-Probe).
type dep struct {
	srv          *httptest.Server
	failing      atomic.Bool
	hits, probes atomic.Int64
	block        chan struct{} // when set, requests wait on it
	mu           sync.Mutex
	probeCallers []string
}

func newDep(t testing.TB) *dep {
	d := &dep{}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.hits.Add(1)
		if r.Header.Get("X-Probe") != "" {
			d.probes.Add(1)
			d.mu.Lock()
			d.probeCallers = append(d.probeCallers, r.Header.Get("X-Caller"))
			d.mu.Unlock()
		}
		d.mu.Lock()
		block := d.block
		d.mu.Unlock()
		if block != nil {
			<-block
		}
		if d.failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// register writes the dependency as instance pod of service, as the operator would.
func (d *dep) register(t testing.TB, cli *clientv3.Client, service, pod string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(d.srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	value, _ := json.Marshal(map[string]any{"service": service, "namespace": "ns", "pod": pod, "address": host, "ports": map[string]int{"http": p}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key(service, pod), string(value)); err != nil {
		t.Fatal(err)
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// callHTTP is a caller's fn for Do: GET /, 5xx is a failure.
func callHTTP(caller string) func(ctx context.Context, inst discovery.Instance) error {
	return func(ctx context.Context, inst discovery.Instance) error {
		hp, _ := inst.HostPort("http")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hp+"/", nil)
		if err != nil {
			return err
		}
		if discovery.IsProbe(ctx) {
			req.Header.Set("X-Probe", "1")
		}
		req.Header.Set("X-Caller", caller)
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode >= 500 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

// clock is a test clock: real time plus an offset the test moves forward.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

// TestDoEndpointBreakerSkipsFailingInstance: one of two instances answers 503; its
// breaker opens after MinCalls and Do stops sending it calls, while every Do succeeds on
// the other instance (retry-on-another) and the service's breaker stays closed.
func TestDoEndpointBreakerSkipsFailingInstance(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	good, bad := newDep(t), newDep(t)
	bad.failing.Store(true)
	good.register(t, cli, "ep-brk", "a")
	bad.register(t, cli, "ep-brk", "b")
	c := newClient(t, discovery.Config{
		Endpoints: []string{srv.Endpoint()}, Service: "ep-brk", FailureThreshold: 1000, // no ejection: the breaker alone
		Breaker: discovery.BreakerConfig{MinCalls: 2, OpenDuration: time.Hour},
	})
	waitSynced(t, c)
	g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(2))
	for range 20 {
		g.Expect(c.Do(context.Background(), 2, callHTTP("t"))).To(Succeed())
	}
	g.Expect(bad.hits.Load()).To(BeEquivalentTo(2), "the failing instance got calls only until its breaker opened")
	g.Expect(good.hits.Load()).To(BeEquivalentTo(20))
	var badInst discovery.Instance
	for _, inst := range c.All() {
		if inst.Pod == "b" {
			badInst = inst
		}
	}
	g.Expect(c.BreakerState(badInst)).To(Equal(discovery.BreakerOpen))
	st := c.BreakerStats()
	g.Expect(st.Service.State).To(Equal(discovery.BreakerClosed))
	g.Expect(st.Endpoints).To(HaveLen(1))
	g.Expect(st.Endpoints[0].Instance).To(Equal(badInst.Key))
}

// TestDoServiceBreakerOpensThenOneProbeCloses: every instance fails; the service's breaker
// opens and Do fails fast without a request; after the open duration one Do is a single
// probe (IsProbe) and its success closes the breaker.
func TestDoServiceBreakerOpensThenOneProbeCloses(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	a, b := newDep(t), newDep(t)
	a.failing.Store(true)
	b.failing.Store(true)
	a.register(t, cli, "svc-brk", "a")
	b.register(t, cli, "svc-brk", "b")
	var mu sync.Mutex
	var events []string
	c := newClient(t, discovery.Config{
		Endpoints: []string{srv.Endpoint()}, Service: "svc-brk", FailureThreshold: 1000,
		Breaker: discovery.BreakerConfig{MinCalls: 4, OpenDuration: time.Minute, OnStateChange: func(ev discovery.BreakerEvent) {
			if ev.Instance == "" {
				mu.Lock()
				events = append(events, ev.From.String()+"->"+ev.To.String())
				mu.Unlock()
			}
		}},
	})
	var clk clock
	discovery.SetClock(c, clk.now)
	waitSynced(t, c)
	g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(2))
	for range 4 {
		g.Expect(c.Do(context.Background(), 1, callHTTP("t"))).NotTo(Succeed())
	}
	g.Expect(c.BreakerStats().Service.State).To(Equal(discovery.BreakerOpen))
	g.Expect(c.BreakerStats().Endpoints).To(BeEmpty(), "the service's trip closes the endpoint breakers: the failure was not theirs")
	hits := a.hits.Load() + b.hits.Load()
	for range 50 {
		g.Expect(c.Do(context.Background(), 2, callHTTP("t"))).To(MatchError(discovery.ErrBreakerOpen))
	}
	g.Expect(a.hits.Load()+b.hits.Load()).To(Equal(hits), "an open breaker sends nothing")
	g.Expect(c.BreakerStats().Rejected).To(BeEquivalentTo(50))

	a.failing.Store(false)
	b.failing.Store(false)
	clk.advance(2 * time.Minute)
	g.Expect(c.Do(context.Background(), 2, callHTTP("t"))).To(Succeed())
	g.Expect(a.probes.Load() + b.probes.Load()).To(BeEquivalentTo(1))
	g.Expect(c.BreakerStats().Service.State).To(Equal(discovery.BreakerClosed))
	mu.Lock()
	g.Expect(events).To(Equal([]string{"Closed->Open", "Open->HalfOpen", "HalfOpen->Closed"}))
	mu.Unlock()
	g.Expect(c.BreakerStats().Probes).To(BeEquivalentTo(1))
}

// TestDoBreakerSlowDependency: a dependency that answers 200 but slowly trips the breaker
// on the slow-call rate.
func TestDoBreakerSlowDependency(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	slow := newDep(t)
	slow.register(t, cli, "slow-brk", "a")
	c := newClient(t, discovery.Config{
		Endpoints: []string{srv.Endpoint()}, Service: "slow-brk",
		Breaker: discovery.BreakerConfig{MinCalls: 3, SlowCallDuration: 50 * time.Millisecond, SlowCallRateThreshold: 0.5, OpenDuration: time.Hour},
	})
	waitSynced(t, c)
	g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	slowFn := func(ctx context.Context, inst discovery.Instance) error {
		time.Sleep(60 * time.Millisecond) // the dependency's latency, not synchronisation
		return callHTTP("t")(ctx, inst)
	}
	for range 3 {
		g.Expect(c.Do(context.Background(), 1, slowFn)).To(Succeed())
	}
	g.Expect(c.BreakerStats().Service.State).To(Equal(discovery.BreakerOpen))
	g.Expect(c.Do(context.Background(), 1, slowFn)).To(MatchError(discovery.ErrBreakerOpen))
}

// TestDoBreakerDisabled keeps the old behaviour: no breaker, ejection only.
func TestDoBreakerDisabled(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	d := newDep(t)
	d.failing.Store(true)
	d.register(t, cli, "off-brk", "a")
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "off-brk", Breaker: discovery.BreakerConfig{Disabled: true, MinCalls: 1}})
	waitSynced(t, c)
	g.Eventually(func() int { return len(c.All()) }).WithTimeout(eventually).Should(Equal(1))
	for range 30 {
		err := c.Do(context.Background(), 1, callHTTP("t"))
		g.Expect(err).To(HaveOccurred())
		g.Expect(errors.Is(err, discovery.ErrBreakerOpen)).To(BeFalse())
	}
	g.Expect(d.hits.Load()).To(BeEquivalentTo(30))
	g.Expect(c.BreakerStats().Enabled).To(BeFalse())
}
