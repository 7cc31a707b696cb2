// Package breaker is the seed's traced scenario (seed 000, §4) as a measurement: a
// fleet of callers, each with its own discovery.Client, calls a dependency that fails for a
// while and then recovers with capacity for only a few concurrent requests. It runs the
// fleet with per-instance breakers and with the coordinated breaker and reports how many
// probes hit the freshly recovered dependency, whether it relapsed, how long until every
// caller's breaker was closed again, and how many store writes the breakers made per call.
package breaker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

var debug = os.Getenv("BREAKERBENCH_DEBUG") != ""

// Config is one run.
type Config struct {
	// Endpoint is the etcd client URL; Prefix the store prefix (a fresh one per run).
	Endpoint, Prefix string
	// Name names the mode in the result (default per-instance or coordinated).
	Name string
	// Coordinated selects the mode; Quorum is its K.
	Coordinated bool
	Quorum      int
	// Callers is the fleet size; CallEvery each caller's interval between calls.
	Callers   int
	CallEvery time.Duration
	// FailFor is how long the dependency fails (503) from the start of the run.
	FailFor time.Duration
	// Capacity is how many requests the recovered dependency serves at once while cold
	// (for Cold from the first request after each recovery); one more makes it relapse: it
	// fails again for RelapseFor.
	Capacity   int
	Cold       time.Duration
	RelapseFor time.Duration
	// ColdLatency and WarmLatency are its answer times.
	ColdLatency, WarmLatency time.Duration
	// Settle is how long the fleet must stay Closed to count as recovered; MaxAfter bounds
	// the run after the first recovery.
	Settle, MaxAfter time.Duration
	// Breaker is every caller's breaker configuration (Coordinated is set from the mode).
	Breaker discovery.BreakerConfig
	// StoreTimeout is the coordinated breaker's.
	StoreTimeout time.Duration
}

// Defaults are the seed's scenario: 50 callers, 20 s of failure, capacity 3 while cold.
func Defaults() Config {
	return Config{
		Quorum: 3, Callers: 50, CallEvery: 100 * time.Millisecond,
		FailFor: 20 * time.Second, Capacity: 3, Cold: 500 * time.Millisecond, RelapseFor: 3 * time.Second,
		ColdLatency: 10 * time.Millisecond, WarmLatency: 2 * time.Millisecond,
		Settle: 3 * time.Second, MaxAfter: 40 * time.Second,
		Breaker: discovery.BreakerConfig{
			Window: 5 * time.Second, MinCalls: 5, FailureRateThreshold: 0.5, SlowCallDuration: 500 * time.Millisecond,
			OpenDuration: 5 * time.Second, OpenJitter: 0.2, HalfOpenPermits: 1, HalfOpenSuccesses: 1, SlowStart: 3 * time.Second,
		},
		StoreTimeout: time.Second,
	}
}

// Result is one run's numbers.
type Result struct {
	Mode string `json:"mode"`
	// ProbesFirstSecond: probes (calls a half-open breaker let through) that reached the
	// dependency within 1 s of the first request after it recovered; RequestsFirstSecond:
	// every request in that second.
	ProbesFirstSecond   int `json:"probesFirstSecond"`
	RequestsFirstSecond int `json:"requestsFirstSecond"`
	// Relapses counts how often the recovered dependency was overloaded and failed again.
	Relapses int `json:"relapses"`
	// FleetClosedAfter is the time from the first recovery until every caller's service
	// breaker was Closed for good (stayed Closed for Settle); -1 when it never was.
	FleetClosedAfter time.Duration `json:"fleetClosedAfterNs"`
	// Calls is every Do of the run; StoreWrites the coordinated breakers' store writes;
	// WritesPerCall their ratio.
	Calls         int64   `json:"calls"`
	StoreWrites   int64   `json:"storeWrites"`
	WritesPerCall float64 `json:"storeWritesPerCall"`
	// Fallbacks counts coordinated callers' switches to their local breaker.
	Fallbacks int64 `json:"fallbacks"`
	// DependencyHits counts every request the dependency got.
	DependencyHits int64 `json:"dependencyHits"`
}

// dependency is the failing-then-fragile service.
type dependency struct {
	cfg Config

	mu         sync.Mutex
	downUntil  time.Time // fails until then
	coldUntil  time.Time // capacity-limited until then
	inFlight   int
	relapses   int
	firstAfter time.Time // arrival of the first request after the first recovery
	probes1s   int
	requests1s int
	hits       int64
}

func (d *dependency) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	probe := r.Header.Get("X-Probe") != ""
	d.mu.Lock()
	d.hits++
	if now.Before(d.downUntil) {
		d.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if d.firstAfter.IsZero() {
		d.firstAfter = now // the first request the recovered dependency gets
	}
	if d.coldUntil.IsZero() {
		d.coldUntil = now.Add(d.cfg.Cold) // it warms up by serving, from its first request
	}
	if now.Sub(d.firstAfter) <= time.Second {
		d.requests1s++
		if probe {
			d.probes1s++
		}
	}
	cold := now.Before(d.coldUntil)
	if debug && cold {
		fmt.Fprintf(os.Stderr, "dep %s cold request probe=%v inFlight=%d\n", now.Format("15:04:05.000"), probe, d.inFlight)
	}
	if cold && d.inFlight >= d.cfg.Capacity {
		// Overloaded while cold: it falls over again.
		d.relapses++
		d.downUntil = now.Add(d.cfg.RelapseFor)
		d.coldUntil = time.Time{}
		d.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	d.inFlight++
	d.mu.Unlock()
	latency := d.cfg.WarmLatency
	if cold {
		latency = d.cfg.ColdLatency
	}
	time.Sleep(latency) // the dependency's service time
	d.mu.Lock()
	d.inFlight--
	d.mu.Unlock()
	_, _ = w.Write([]byte("ok"))
}

// Run runs the scenario once.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Mode: "per-instance", FleetClosedAfter: -1}
	if cfg.Coordinated {
		res.Mode = "coordinated"
	}
	if cfg.Name != "" {
		res.Mode = cfg.Name
	}
	start := time.Now()
	dep := &dependency{cfg: cfg}
	dep.downUntil = start.Add(cfg.FailFor)
	srv := httptest.NewServer(dep)
	defer srv.Close()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.Endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return res, err
	}
	defer cli.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	val, _ := json.Marshal(map[string]any{"service": "payments", "namespace": "bench", "pod": "payments-0", "address": host, "ports": map[string]int{"http": p}})
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = cli.Put(pctx, discovery.ServicePrefix(cfg.Prefix, "payments")+"bench/payments-0", string(val))
	cancel()
	if err != nil {
		return res, fmt.Errorf("register the dependency: %w", err)
	}

	clients := make([]*discovery.Client, cfg.Callers)
	for i := range clients {
		br := cfg.Breaker
		if cfg.Coordinated {
			br.Coordinated = &discovery.CoordinatedConfig{Quorum: cfg.Quorum, StoreTimeout: cfg.StoreTimeout, CallerID: fmt.Sprintf("caller-%02d", i)}
		}
		if os.Getenv("BREAKERBENCH_DEBUG") != "" {
			id := i
			br.OnStateChange = func(ev discovery.BreakerEvent) {
				fmt.Fprintf(os.Stderr, "%s caller %02d %q %s->%s %s\n", ev.At.Format("15:04:05.000"), id, ev.Instance, ev.From, ev.To, ev.Reason)
			}
		}
		c, err := discovery.New(discovery.Config{Endpoints: []string{cfg.Endpoint}, Prefix: cfg.Prefix, Service: "payments", Breaker: br, FailureThreshold: 1 << 30})
		if err != nil {
			return res, err
		}
		defer c.Close()
		clients[i] = c
	}
	for _, c := range clients {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := c.WaitSynced(wctx)
		cancel()
		if err != nil {
			return res, err
		}
	}
	// Restart the clock now that the fleet is ready.
	start = time.Now()
	dep.mu.Lock()
	dep.downUntil = start.Add(cfg.FailFor)
	dep.mu.Unlock()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var calls atomic.Int64
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			caller(runCtx, c, i, cfg, &calls)
		}()
	}

	// Watch the fleet: when was every caller's breaker Closed for good?
	recovered := start.Add(cfg.FailFor)
	var closedSince time.Time
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := recovered.Add(cfg.MaxAfter)
	for {
		select {
		case <-ctx.Done():
			stop()
			wg.Wait()
			return res, ctx.Err()
		case now := <-tick.C:
			all := now.After(recovered)
			for _, c := range clients {
				if !all {
					break
				}
				all = c.BreakerStats().Service.State == discovery.BreakerClosed
			}
			switch {
			case !all:
				closedSince = time.Time{}
			case closedSince.IsZero():
				closedSince = now
			}
			if !closedSince.IsZero() && now.Sub(closedSince) >= cfg.Settle {
				res.FleetClosedAfter = closedSince.Sub(recovered)
			}
			if res.FleetClosedAfter >= 0 || now.After(deadline) {
				stop()
				wg.Wait()
				for _, c := range clients {
					if st := c.BreakerStats().Coordinated; st != nil {
						res.StoreWrites += st.StoreWrites
						res.Fallbacks += st.Fallbacks
					}
				}
				res.Calls = calls.Load()
				if res.Calls > 0 {
					res.WritesPerCall = float64(res.StoreWrites) / float64(res.Calls)
				}
				dep.mu.Lock()
				res.ProbesFirstSecond, res.RequestsFirstSecond = dep.probes1s, dep.requests1s
				res.Relapses, res.DependencyHits = dep.relapses, dep.hits
				dep.mu.Unlock()
				return res, nil
			}
		}
	}
}

// caller calls the dependency at random (a Poisson process with mean interval CallEvery, as
// a caller serving its own random traffic would) until ctx ends.
func caller(ctx context.Context, c *discovery.Client, i int, cfg Config, calls *atomic.Int64) {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	t := time.NewTimer(time.Duration(rng.ExpFloat64() * float64(cfg.CallEvery)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(time.Duration(rng.ExpFloat64() * float64(cfg.CallEvery)))
		calls.Add(1)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = c.Do(cctx, 1, func(ctx context.Context, inst discovery.Instance) error {
			hp, _ := inst.HostPort("http")
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hp+"/", nil)
			if err != nil {
				return err
			}
			if discovery.IsProbe(ctx) {
				req.Header.Set("X-Probe", "1")
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode >= 500 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
		cancel()
	}
}

// HotPath measures Do's cost per call with a nop call function (3 instances, every
// breaker closed): no breaker, per-instance, coordinated. ns per call.
func HotPath(ctx context.Context, endpoint, prefix string) (map[string]float64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	for i := range 3 {
		val, _ := json.Marshal(map[string]any{"address": fmt.Sprintf("10.0.0.%d", i), "ports": map[string]int{"http": 80}})
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := cli.Put(pctx, discovery.ServicePrefix(prefix, "hot")+fmt.Sprintf("bench/p%d", i), string(val))
		cancel()
		if err != nil {
			return nil, err
		}
	}
	modes := []struct {
		name string
		br   discovery.BreakerConfig
	}{
		{"none", discovery.BreakerConfig{Disabled: true}},
		{"per-instance", discovery.BreakerConfig{}},
		{"coordinated", discovery.BreakerConfig{Coordinated: &discovery.CoordinatedConfig{Quorum: 3, StoreTimeout: 10 * time.Second}}},
	}
	out := map[string]float64{}
	for _, m := range modes {
		c, err := discovery.New(discovery.Config{Endpoints: []string{endpoint}, Prefix: prefix, Service: "hot", Breaker: m.br})
		if err != nil {
			return nil, err
		}
		deadline := time.Now().Add(60 * time.Second)
		for len(c.All()) < 3 || (m.br.Coordinated != nil && c.BreakerStats().Coordinated.Fallback) {
			if time.Now().After(deadline) {
				c.Close()
				return nil, fmt.Errorf("hot-path client %s not ready", m.name)
			}
			time.Sleep(10 * time.Millisecond)
		}
		fn := func(context.Context, discovery.Instance) error { return nil }
		r := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				_ = c.Do(ctx, 2, fn)
			}
		})
		c.Close()
		out[m.name] = float64(r.T.Nanoseconds()) / float64(r.N)
	}
	return out, nil
}
