package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// Rounds are the measured phase: every pod becomes ready, unready, ready again, and is
// deleted, each round in its own random order at the offered rate.
var Rounds = []Cause{CauseReady, CauseUnready, CauseReady, CauseDelete}

// System names in results.
const (
	SystemRegistrar     = "registrar"
	SystemEndpointSlice = "endpointslice"
	// SystemTTLGraceful are self-registered instances that revoke their lease themselves on
	// every deregistration; SystemTTLCrash ones crash (the lease expires).
	SystemTTLGraceful = "ttl-graceful"
	SystemTTLCrash    = "ttl-crash"
	// SystemAPIWatch is the floor: the pod write seen by a watch of the API server, from the
	// watcher process on its own connection like every other system.
	SystemAPIWatch = "apiwatch"
	// SystemAPIWatchShared is a diagnostic, the old harness's floor: a pod watch inside the
	// harness process on the connection its writers use. It is not a peer; when it lags far
	// behind SystemAPIWatch, the harness (its CPU or its connection) is what lags.
	SystemAPIWatchShared = "apiwatch-shared"
	// SystemAPIWatchInProc is the second diagnostic: a pod watch inside the harness process
	// on a connection of its own. Against SystemAPIWatch it shows what the harness process
	// costs (its CPU); against SystemAPIWatchShared what sharing the writers' connection does.
	SystemAPIWatchInProc = "apiwatch-inproc"
)

// systemOrder is the order of systems in tables.
var systemOrder = []string{SystemRegistrar, SystemEndpointSlice, SystemTTLGraceful, SystemTTLCrash, SystemAPIWatch, SystemAPIWatchInProc, SystemAPIWatchShared}

// diagnostic reports whether a system is a diagnostic of the harness rather than a peer.
func diagnostic(system string) bool {
	return system == SystemAPIWatchShared || system == SystemAPIWatchInProc
}

// runner is one run in progress.
type runner struct {
	c           *Config
	cl          *cluster
	l           layout
	trackers    map[string]*Tracker
	ttl         map[string]*ttlRegistry // system -> registry
	ttlSample   map[string]string       // pod -> TTL system it also runs as
	writeErrors atomic.Int64
	writes      int
	writeSpan   time.Duration
	wg          sync.WaitGroup
	// paceLags are how late each write was sent against its schedule (the offered rate);
	// writeRTTs how long each API write took.
	lagMu      sync.Mutex
	paceLags   []time.Duration
	writeRTTs  []time.Duration
	loadBefore [3]float64
	watchers   *watcherHandle
	// flipped are the indices of the pods the rounds flip (Config.TransitionsPerRound).
	flipped []int
	// created and settled: how long creating the objects took, and until every system
	// showed them (from the start of the creation).
	created, settledAfter time.Duration
}

// Run performs one benchmark run.
func Run(ctx context.Context, c Config) (*Results, error) {
	c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	loadBefore := benchfmt.LoadAvg()
	c.Logf("starting kube-apiserver, etcd, the store, registrar (%s)%s", c.Operator, map[bool]string{true: " and kube-controller-manager"}[c.EndpointSlice])
	cl, err := startCluster(ctx, &c)
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	r := &runner{c: &c, cl: cl, l: newLayout(&c), trackers: map[string]*Tracker{SystemRegistrar: NewTracker()}, loadBefore: loadBefore,
		flipped: flippedPods(c.Pods, c.TransitionsPerRound, c.Seed)}
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	return r.measure(ctx)
}

func (r *runner) setup(ctx context.Context) error {
	start := time.Now()
	r.c.Logf("creating %d namespaces, %d nodes, %d ServiceRegistries%s and %d pods",
		len(r.l.namespaces), len(r.l.nodes), len(r.l.services), map[bool]string{true: " and Services"}[r.c.EndpointSlice], len(r.l.pods))
	if err := r.cl.createObjects(ctx, r.l, r.c.EndpointSlice, false); err != nil {
		return err
	}
	r.created = time.Since(start)
	r.c.Logf("created %d pods in %s (%.0f/s); waiting for the systems to settle", len(r.l.pods), r.created.Round(time.Millisecond),
		float64(len(r.l.pods))/r.created.Seconds())
	if err := r.waitSettled(ctx); err != nil {
		return err
	}
	r.settledAfter = time.Since(start)
	r.c.Logf("settled after %s", r.settledAfter.Round(time.Millisecond))
	r.trackers[SystemAPIWatch] = NewTracker()
	r.trackers[SystemAPIWatchShared] = NewTracker()
	r.trackers[SystemAPIWatchInProc] = NewTracker()
	if r.c.EndpointSlice {
		r.trackers[SystemEndpointSlice] = NewTracker()
	}
	r.ttl = map[string]*ttlRegistry{}
	r.ttlSample = map[string]string{}
	if r.c.TTLSample > 0 {
		// Two disjoint samples: graceful clients and crashing ones.
		r.trackers[SystemTTLGraceful] = NewTracker()
		r.trackers[SystemTTLCrash] = NewTracker()
		r.ttl[SystemTTLGraceful] = newTTLRegistry(r.cl.storeCli, TTLGracefulPrefix, r.c.TTL, true)
		r.ttl[SystemTTLCrash] = newTTLRegistry(r.cl.storeCli, TTLCrashPrefix, r.c.TTL, false)
		rng := rand.New(rand.NewPCG(uint64(r.c.Seed), 1))
		perm := rng.Perm(len(r.flipped))
		for i, j := range perm[:2*r.c.TTLSample] {
			k := r.flipped[j]
			sys := SystemTTLGraceful
			if i%2 == 1 {
				sys = SystemTTLCrash
			}
			r.ttlSample[r.l.pods[k].ID()] = sys
		}
	}
	return nil
}

// waitSettled waits until registrar reports every pod (none in the store) and, with the
// EndpointSlice peer, the slices list every pod.
func (r *runner) waitSettled(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.c.SetupTimeout)
	defer cancel()
	var last string
	for {
		done, state, err := r.settled(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if state != last {
			r.c.Logf("  waiting: %s", state)
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("systems did not settle (%s): %w", state, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func (r *runner) settled(ctx context.Context) (bool, string, error) {
	if err := r.cl.operator.Exited(); err != nil {
		return false, "", err
	}
	var regs v1beta1.ServiceRegistryList
	if err := r.cl.client.List(ctx, &regs); err != nil {
		return false, "", fmt.Errorf("list ServiceRegistries: %w", err)
	}
	reported := 0
	for _, reg := range regs.Items {
		if reg.Status.ObservedGeneration == reg.Generation {
			reported += len(reg.Status.Endpoints)
		}
	}
	keys, err := countKeys(ctx, r.cl.storeCli, StorePrefix)
	if err != nil {
		return false, "", err
	}
	state := fmt.Sprintf("registrar reports %d/%d pods, %d keys in the store", reported, len(r.l.pods), keys)
	done := reported == len(r.l.pods) && keys == 0
	if r.c.EndpointSlice {
		if err := r.cl.kcm.Exited(); err != nil {
			return false, "", err
		}
		_, _, endpoints, err := listSlices(ctx, r.cl.kube)
		if err != nil {
			return false, "", err
		}
		state += fmt.Sprintf("; EndpointSlices list %d/%d pods", endpoints, len(r.l.pods))
		done = done && endpoints == len(r.l.pods)
	}
	return done, state, nil
}

func countKeys(ctx context.Context, cli *clientv3.Client, prefix string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("count keys under %s: %w", prefix, err)
	}
	var n int64
	for _, kv := range resp.Kvs {
		if !operatorOwn(prefix, string(kv.Key)) {
			n++
		}
	}
	return n, nil
}

// startWatchers starts the timing watchers (every system, each on its own connection, in the
// watcher process when Config.WatcherExe is set) and the diagnostic shared-connection pod
// watch in the harness, from the state after setup.
func (r *runner) startWatchers(ctx context.Context) (func() (WatcherStats, error), error) {
	rev, err := storeRevision(ctx, r.cl.storeCli)
	if err != nil {
		return nil, err
	}
	kc, err := r.cl.kubeconfig(r.c.WorkDir, "bench-watcher")
	if err != nil {
		return nil, err
	}
	spec := watcherSpec{Kubeconfig: kc, StoreEndpoint: r.cl.store.Endpoint(), StoreRevision: rev,
		Prefixes: map[string]string{SystemRegistrar: StorePrefix}, Pods: true, Slices: r.c.EndpointSlice,
		FaultCut: r.c.FaultWatchCut, FaultRelist: r.c.FaultWatchRelist}
	if r.c.TTLSample > 0 {
		spec.Prefixes[SystemTTLGraceful] = TTLGracefulPrefix
		spec.Prefixes[SystemTTLCrash] = TTLCrashPrefix
	}
	timed := map[string]*Tracker{}
	for name, t := range r.trackers {
		if !diagnostic(name) {
			timed[name] = t
		}
	}
	h, err := startTimingWatchers(ctx, r.c.WatcherExe, r.c.WorkDir, spec, timed)
	if err != nil {
		return nil, err
	}
	r.watchers = h
	own, err := kubernetes.NewForConfig(ownConnection(r.cl.cfg))
	if err != nil {
		_ = h.finish()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	diag := make(chan error, 2)
	for _, d := range []struct {
		kube kubernetes.Interface
		t    *Tracker
	}{{r.cl.kube, r.trackers[SystemAPIWatchShared]}, {own, r.trackers[SystemAPIWatchInProc]}} {
		fn, err := startPodWatch(sctx, d.kube, d.t, watchFaults{})
		if err != nil {
			cancel()
			_ = h.finish()
			return nil, err
		}
		go func() { diag <- fn() }()
	}
	return func() (WatcherStats, error) {
		cancel()
		err := h.finish()
		for range 2 {
			if derr := <-diag; derr != nil && !errors.Is(derr, context.Canceled) {
				err = errors.Join(err, derr)
			}
		}
		return h.stats, err
	}, nil
}

func (r *runner) measure(ctx context.Context) (*Results, error) {
	stopWatchers, err := r.startWatchers(ctx)
	if err != nil {
		return nil, err
	}
	before, err := r.usage()
	if err != nil {
		return nil, err
	}
	scrapeBefore, err := r.scrapeMetrics(ctx, "before")
	if err != nil {
		return nil, err
	}
	profiles := r.startProfiles(ctx)
	harnessLag := startSchedLag(ctx)
	busyBefore, _ := machineBusySeconds()
	treeBefore := treeCPUSeconds()
	measureStart := time.Now()
	rng := rand.New(rand.NewPCG(uint64(r.c.Seed), 2))
	for i, cause := range Rounds {
		order := make([]int, len(r.flipped))
		for n, j := range rng.Perm(len(r.flipped)) {
			order[n] = r.flipped[j]
		}
		if err := r.round(ctx, i+1, cause, order); err != nil {
			_, _ = stopWatchers()
			harnessLag()
			return nil, err
		}
	}
	// A window for late writes: a key rewritten after its transition showed counts as unexpected.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(r.c.Settle):
	}
	after, err := r.usage()
	if err != nil {
		return nil, err
	}
	busyAfter, _ := machineBusySeconds()
	treeAfter := treeCPUSeconds()
	measured := time.Since(measureStart)
	hlag := harnessLag()
	scrapeAfter, err := r.scrapeMetrics(ctx, "after")
	if err != nil {
		return nil, err
	}
	paths := profiles()
	metricsFile := filepath.Join(r.c.WorkDir, "registrar-metrics.txt")
	if err := r.fetch(ctx, r.cl.metrics, "/metrics", metricsFile, 30*time.Second); err != nil {
		r.c.Logf("operator metrics: %v", err)
	}
	for _, t := range r.ttl {
		t.stop()
	}
	r.wg.Wait()
	wstats, err := stopWatchers()
	if err != nil {
		return nil, err
	}
	res := r.results(before, after)
	res.Harness = r.harnessStats(hlag, wstats, measured, busyAfter-busyBefore, treeBefore, treeAfter)
	res.Machine = benchfmt.MachineFacts()
	res.Machine.LoadBefore, res.Machine.LoadAfter = r.loadBefore, benchfmt.LoadAvg()
	res.Warnings = warnings(r.c, res)
	res.Profiles = paths
	res.Operator = operatorStats(sumMetrics(scrapeBefore.operator), sumMetrics(scrapeAfter.operator))
	res.Tails = tailsBetween(scrapeBefore, scrapeAfter)
	res.StoreCommit = storeCommitOf(scrapeBefore.store, scrapeAfter.store, res)
	return res, nil
}

// round writes one transition per pod at the offered rate, then waits until every system
// showed them (or RoundTimeout passed: what is still pending is lost).
func (r *runner) round(ctx context.Context, n int, cause Cause, order []int) error {
	start := time.Now()
	interval := time.Duration(float64(time.Second) / r.c.Rate)
	sem := make(chan struct{}, r.c.Writers)
	var wg sync.WaitGroup
	for i, k := range order {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(start.Add(time.Duration(i) * interval))):
		}
		scheduled := start.Add(time.Duration(i) * interval)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r.transition(ctx, r.l.pods[k], cause, scheduled)
		})
	}
	wg.Wait()
	span := time.Since(start)
	r.writes += len(order)
	r.writeSpan += span
	r.c.Logf("round %d (%s): %d writes in %s (%.0f/s); waiting for every system", n, cause, len(order),
		span.Round(time.Millisecond), float64(len(order))/span.Seconds())
	r.waitRound(ctx)
	for _, t := range r.trackers {
		t.EndRound()
	}
	r.c.Logf("round %d done after %s", n, time.Since(start).Round(time.Millisecond))
	return nil
}

func (r *runner) waitRound(ctx context.Context) {
	deadline := time.Now().Add(r.c.RoundTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pending := 0
		for _, t := range r.trackers {
			pending += t.Pending()
		}
		if pending == 0 {
			return
		}
		if err := r.cl.operator.Exited(); err != nil {
			r.c.Logf("%v: its pending transitions count as lost", err)
			return
		}
		if err := r.watchers.running(); err != nil {
			r.c.Logf("%v: pending transitions count as lost", err)
			return
		}
		time.Sleep(10 * time.Millisecond) // polling counters of running watchers
	}
}

// transition writes one pod transition and tells every system's tracker about it first.
func (r *runner) transition(ctx context.Context, p benchPod, cause Cause, scheduled time.Time) {
	at := time.Now()
	id := p.ID()
	targets := []*Tracker{r.trackers[SystemRegistrar], r.trackers[SystemAPIWatch], r.trackers[SystemAPIWatchShared], r.trackers[SystemAPIWatchInProc]}
	if t := r.trackers[SystemEndpointSlice]; t != nil {
		targets = append(targets, t)
	}
	for _, t := range targets {
		t.Expect(id, cause, at)
	}
	if sys, ok := r.ttlSample[id]; ok {
		t, reg := r.trackers[sys], r.ttl[sys]
		t.Expect(id, cause, at)
		r.wg.Go(func() {
			if err := reg.act(ctx, p, cause); err != nil {
				t.Cancel(id)
				r.writeError(err)
			}
		})
	}
	err := r.cl.write(ctx, p, cause, at)
	r.lagMu.Lock()
	r.paceLags = append(r.paceLags, max(at.Sub(scheduled), 0))
	r.writeRTTs = append(r.writeRTTs, time.Since(at))
	r.lagMu.Unlock()
	if err != nil {
		for _, t := range targets {
			t.Cancel(id)
		}
		r.writeError(err)
	}
}

func (r *runner) writeError(err error) {
	if r.writeErrors.Add(1) <= 5 {
		r.c.Logf("write failed: %v", err)
	}
}

// usage reads the operator's and kube-controller-manager's resource use.
func (r *runner) usage() (map[string]Usage, error) {
	out := map[string]Usage{}
	u, err := readUsage(r.cl.operator.Pid())
	if err != nil {
		return nil, err
	}
	out[SystemRegistrar] = u
	if r.cl.kcm != nil {
		if u, err = readUsage(r.cl.kcm.Pid()); err != nil {
			return nil, err
		}
		out[SystemEndpointSlice] = u
	}
	return out, nil
}

// startProfiles fetches the operator's CPU profile from now on; the function it returns
// fetches the heap profile and waits for the CPU profile. Failures are logged, not fatal.
func (r *runner) startProfiles(ctx context.Context) func() []string {
	if r.c.ProfileDir == "" {
		return func() []string { return nil }
	}
	if err := os.MkdirAll(r.c.ProfileDir, 0o755); err != nil {
		r.c.Logf("profiles: %v", err)
		return func() []string { return nil }
	}
	cpu := filepath.Join(r.c.ProfileDir, "registrar-cpu.pprof")
	done := make(chan error, 1)
	go func() {
		done <- r.fetch(ctx, r.cl.pprof, fmt.Sprintf("/debug/pprof/profile?seconds=%d", r.c.ProfileSeconds), cpu, time.Duration(r.c.ProfileSeconds+30)*time.Second)
	}()
	return func() []string {
		heap := filepath.Join(r.c.ProfileDir, "registrar-heap.pprof")
		paths := []string{}
		if err := r.fetch(ctx, r.cl.pprof, "/debug/pprof/heap", heap, 30*time.Second); err != nil {
			r.c.Logf("heap profile: %v", err)
		} else {
			paths = append(paths, heap)
		}
		if err := <-done; err != nil {
			r.c.Logf("CPU profile: %v", err)
		} else {
			paths = append(paths, cpu)
		}
		return paths
	}
}

func (r *runner) fetch(ctx context.Context, addr, path, file string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s", path, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	return f.Close()
}
