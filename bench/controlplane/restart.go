package controlplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/bench/benchfmt"
	"github.com/registrar-dev/registrar/test/support/metrics"
)

// The restart benchmark (make bench-restart, issue 39 §3): on one populated control plane,
// every pod registered, kill a controller and let it come back, with nothing changed and
// again while pods die: registrar restarted (one replica, killed and started again),
// registrar failing over (two replicas with leader election, the leader killed, the standby
// takes over) and kube-controller-manager's EndpointSlice controller restarted. For each:
// the writes it caused (to the store; to EndpointSlices), its API requests, the time until
// its initial list went through its work queue (synced), the serving process's peak RSS, and
// the deregistration lag of the pods that died meanwhile.

// Restart scenarios, in the order a run plays them by default.
const (
	// ScenarioRestart: registrar's one replica (no leader election, as the harness runs it)
	// killed and started again at once.
	ScenarioRestart = "restart"
	// ScenarioKCMRestart: kube-controller-manager (only its EndpointSlice controller, no
	// leader election) killed and started again at once.
	ScenarioKCMRestart = "kcm-restart"
	// ScenarioFailover: two registrar replicas with leader election; the leader is killed
	// and the standby (caches warm) takes over once the lease expires (or is released).
	ScenarioFailover = "failover"
)

// RestartScenarios are every scenario, in the order a run plays them.
var RestartScenarios = []string{ScenarioRestart, ScenarioKCMRestart, ScenarioFailover}

// KindRestart is the envelope kind of the restart benchmark (make bench-restart).
const KindRestart = "bench-restart"

// RestartConfig is what the restart benchmark does on each control plane (Config sizes it).
type RestartConfig struct {
	// Scenarios to play (RestartScenarios by default; ScenarioKCMRestart needs the
	// EndpointSlice controller).
	Scenarios []string
	// Trials of each scenario on one control plane: each is a kill with nothing changed,
	// then a kill while Dying pods die.
	Trials int
	// Dying pods die during each kill of the second kind (half deleted, half turned
	// unready), spread evenly over DyingOver from just after the kill.
	Dying     int
	DyingOver time.Duration
	// Signal kills the controller (SIGKILL by default: a crash; SIGTERM lets registrar
	// release its leader election lease on the way out).
	Signal syscall.Signal
	// SyncTimeout bounds the wait for the serving process to sync after a kill.
	SyncTimeout time.Duration
	// Tail keeps counting writes and requests this long after the sync (and the deaths).
	Tail time.Duration
	// FailoverArgs are the leader election flags of the fail-over pair beyond --leader-elect
	// and --leader-election-namespace (none: the binary's defaults, as the shipped manifests
	// run it: a 15 s lease).
	FailoverArgs []string
}

// Defaults fills unset fields.
func (rc *RestartConfig) Defaults() {
	if len(rc.Scenarios) == 0 {
		rc.Scenarios = RestartScenarios
	}
	if rc.Trials <= 0 {
		rc.Trials = 1
	}
	if rc.Dying <= 0 {
		rc.Dying = 100
	}
	if rc.DyingOver <= 0 {
		rc.DyingOver = 10 * time.Second
	}
	if rc.Signal == 0 {
		rc.Signal = syscall.SIGKILL
	}
	if rc.SyncTimeout <= 0 {
		rc.SyncTimeout = 5 * time.Minute
	}
	if rc.Tail <= 0 {
		rc.Tail = 5 * time.Second
	}
}

func (rc *RestartConfig) validate(c *Config) error {
	for _, s := range rc.Scenarios {
		switch s {
		case ScenarioRestart, ScenarioFailover:
		case ScenarioKCMRestart:
			if !c.EndpointSlice {
				return fmt.Errorf("scenario %s needs the EndpointSlice controller", s)
			}
		default:
			return fmt.Errorf("unknown restart scenario %q (want %s)", s, strings.Join(RestartScenarios, ", "))
		}
	}
	if n := len(rc.Scenarios) * rc.Trials * rc.Dying; n > c.Pods {
		return fmt.Errorf("%d scenarios × %d trials × %d dying pods = %d pods die, more than the %d pods", len(rc.Scenarios), rc.Trials, rc.Dying, n, c.Pods)
	}
	if rc.Signal != syscall.SIGKILL && rc.Signal != syscall.SIGTERM {
		return fmt.Errorf("signal %v: want SIGKILL or SIGTERM", rc.Signal)
	}
	return nil
}

// RestartRun is one control plane of the restart benchmark: its size and every kill.
type RestartRun struct {
	Date       time.Time `json:"date"`
	Command    string    `json:"command,omitempty"`
	Pods       int       `json:"pods"`
	Registries int       `json:"registries"`
	Namespaces int       `json:"namespaces"`
	// Dying pods died during each kill of that kind, spread over DyingOverSeconds.
	Dying            int      `json:"dyingPerKill"`
	DyingOverSeconds float64  `json:"dyingOverSeconds"`
	Signal           string   `json:"signal"`
	FailoverArgs     []string `json:"failoverArgs,omitempty"`
	Reconciles       int      `json:"workers"`
	// CreateSeconds: creating the objects (every pod ready); SetupSeconds: until registrar
	// had every pod in the store and the EndpointSlices listed every pod ready.
	CreateSeconds float64          `json:"createSeconds"`
	SetupSeconds  float64          `json:"setupSeconds"`
	Events        []RestartEvent   `json:"events"`
	Machine       benchfmt.Machine `json:"machine"`
	Warnings      []string         `json:"warnings"`
}

// RestartEvent is one kill and what followed, over a window from the kill until the serving
// process had synced, the dying pods had left (or RoundTimeout passed) and Tail more.
type RestartEvent struct {
	Scenario string `json:"scenario"`
	// System is the one killed: SystemRegistrar or SystemEndpointSlice.
	System string `json:"system"`
	Trial  int    `json:"trial"`
	// Dying pods died during the window (0: nothing changed).
	Dying int `json:"dying"`
	// UpSeconds: from the kill until the serving process answered /metrics (a restart) or,
	// in a fail-over, reported holding the lease (LeaderSeconds too).
	UpSeconds     *float64 `json:"upSeconds,omitempty"`
	LeaderSeconds *float64 `json:"leaderSeconds,omitempty"`
	// SyncedSeconds: from the kill until the serving process's work queue had taken in and
	// processed its initial list (every ServiceRegistry; every Service) and was empty and
	// idle; nil when that did not happen within RestartConfig.SyncTimeout.
	SyncedSeconds *float64 `json:"syncedSeconds,omitempty"`
	WindowSeconds float64  `json:"windowSeconds"`
	// Writes are the system's writes its timing watch saw in the window (registrar: endpoint
	// keys of the store, its own bookkeeping not included; EndpointSlices: every create,
	// update and delete of the controller's slices); WritesForDeaths those that showed a dying
	// pod's deregistration; WritesCaused the rest (target 0).
	Writes          int `json:"writes"`
	WritesForDeaths int `json:"writesForDeaths"`
	WritesCaused    int `json:"writesCaused"`
	// StoreEtcd are the store etcd's own counters over the window (registrar only): every key
	// it applied, the operator's fence, heartbeat and canary included (etcd_mvcc_put_total,
	// _delete_total, _txn_total), and the reads (etcd_mvcc_range_total).
	StoreEtcd map[string]int `json:"storeEtcd,omitempty"`
	// APIRequests the serving process made in the window (its rest_client_requests_total: a
	// new process's from its start), by method.
	APIRequests int            `json:"apiRequests"`
	APIByMethod map[string]int `json:"apiByMethod"`
	// PeakRSSMiB is the serving process's VmHWM at the end of the window (a restarted
	// process: its initial list; a standby: its whole life, its own start included);
	// PeakRSSBeforeMiB the killed process's VmHWM before the kill, or in a fail-over the
	// standby's before it.
	PeakRSSMiB       float64 `json:"peakRssMiB"`
	PeakRSSBeforeMiB float64 `json:"peakRssBeforeMiB"`
	// CPUSeconds the serving process used in the window.
	CPUSeconds float64 `json:"cpuSeconds"`
	// Dereg is the deregistration lag of the dying pods in the killed system; Lost the deaths
	// it had not shown when the window closed; Floor the same pods' lag in a plain API watch;
	// Peer in the other system (not killed), when it runs.
	Dereg LagStats  `json:"deregistrationLag"`
	Lost  int       `json:"lost"`
	Floor LagStats  `json:"floor"`
	Peer  *LagStats `json:"peer,omitempty"`
	// PeerWritesNoDeath are the other system's writes in the window that showed no death:
	// what the deaths alone cost it, against WritesCaused of the killed system.
	PeerWritesNoDeath *int `json:"peerWritesNoDeath,omitempty"`
	// WriteErrors are deaths the harness failed to write (not counted anywhere else).
	WriteErrors int `json:"writeErrors,omitempty"`
}

// restartRunner plays the scenarios on one control plane.
type restartRunner struct {
	c   *Config
	rc  *RestartConfig
	cl  *cluster
	l   layout
	run *RestartRun
	// alive are the indices of the pods still registered, in random order: deaths take the
	// first ones.
	alive     []int
	watcherKC string
	events    int
}

// RunRestart populates a control plane (every pod ready and registered) and plays
// rc.Scenarios on it.
func RunRestart(ctx context.Context, c Config, rc RestartConfig) (*RestartRun, error) {
	c.Defaults()
	rc.Defaults()
	c.TTLSample = 0
	c.kcmMetrics = true
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := rc.validate(&c); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	run := &RestartRun{Date: time.Now().UTC(), Pods: c.Pods, Registries: c.Registries, Namespaces: c.Namespaces,
		Dying: rc.Dying, DyingOverSeconds: rc.DyingOver.Seconds(), Signal: signalName(rc.Signal), FailoverArgs: rc.FailoverArgs,
		Reconciles: c.Reconciles, Machine: benchfmt.MachineFacts()}
	run.Machine.LoadBefore = benchfmt.LoadAvg()
	c.Logf("starting kube-apiserver, etcd, the store, registrar (%s)%s", c.Operator, map[bool]string{true: " and kube-controller-manager"}[c.EndpointSlice])
	cl, err := startCluster(ctx, &c)
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	r := &restartRunner{c: &c, rc: &rc, cl: cl, l: newLayout(&c), run: run,
		alive: rand.New(rand.NewPCG(uint64(c.Seed), 4)).Perm(c.Pods)}
	if err := r.populate(ctx); err != nil {
		return nil, err
	}
	if r.watcherKC, err = cl.kubeconfig(c.WorkDir, "bench-watcher"); err != nil {
		return nil, err
	}
	for _, s := range rc.Scenarios {
		var err error
		switch s {
		case ScenarioRestart:
			err = r.restartOperator(ctx)
		case ScenarioKCMRestart:
			err = r.restartKCM(ctx)
		case ScenarioFailover:
			err = r.failover(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	run.Machine.LoadAfter = benchfmt.LoadAvg()
	run.Warnings = restartWarnings(run)
	return run, nil
}

func signalName(s syscall.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGKILL"
}

// populate creates the objects, every pod ready, and waits until registrar has every pod in
// the store and reports it, and the EndpointSlices list every pod ready.
func (r *restartRunner) populate(ctx context.Context) error {
	start := time.Now()
	r.c.Logf("creating %d namespaces, %d nodes, %d ServiceRegistries%s and %d ready pods",
		len(r.l.namespaces), len(r.l.nodes), len(r.l.services), map[bool]string{true: " and Services"}[r.c.EndpointSlice], len(r.l.pods))
	if err := r.cl.createObjects(ctx, r.l, r.c.EndpointSlice, true); err != nil {
		return err
	}
	r.run.CreateSeconds = time.Since(start).Seconds()
	r.c.Logf("created %d pods in %s (%.0f/s); waiting until every pod is registered", len(r.l.pods), time.Since(start).Round(time.Millisecond),
		float64(len(r.l.pods))/time.Since(start).Seconds())
	ctx, cancel := context.WithTimeout(ctx, r.c.SetupTimeout)
	defer cancel()
	last := ""
	for {
		done, state, err := r.registered(ctx)
		if err != nil {
			return err
		}
		if done {
			break
		}
		if state != last {
			r.c.Logf("  waiting: %s", state)
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pods not registered (%s): %w", state, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	r.run.SetupSeconds = time.Since(start).Seconds()
	r.c.Logf("every pod registered after %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// registered reports whether every pod is in the store and in registrar's status, and listed
// ready by the EndpointSlices.
func (r *restartRunner) registered(ctx context.Context) (bool, string, error) {
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
			reported += int(reg.Status.Registered)
		}
	}
	keys, err := countKeys(ctx, r.cl.storeCli, StorePrefix)
	if err != nil {
		return false, "", err
	}
	n := len(r.l.pods)
	state := fmt.Sprintf("registrar reports %d/%d pods registered, %d keys in the store", reported, n, keys)
	done := reported == n && keys == int64(n)
	if r.c.EndpointSlice {
		if err := r.cl.kcm.Exited(); err != nil {
			return false, "", err
		}
		view, _, _, err := listSlices(ctx, r.cl.kube)
		if err != nil {
			return false, "", err
		}
		state += fmt.Sprintf("; EndpointSlices list %d/%d pods ready", len(view.ready), n)
		done = done && len(view.ready) == n
	}
	return done, state, nil
}

// take removes n pods from the registered ones and returns them.
func (r *restartRunner) take(n int) []int {
	out := r.alive[:n:n]
	r.alive = r.alive[n:]
	return out
}

// restartOperator kills registrar's replica and starts it again, each trial twice: with
// nothing changed, then while pods die.
func (r *restartRunner) restartOperator(ctx context.Context) error {
	op := &replica{proc: r.cl.operator, metrics: r.cl.metrics}
	for trial := 1; trial <= r.rc.Trials; trial++ {
		for _, deaths := range [][]int{nil, r.take(r.rc.Dying)} {
			ev, err := r.measure(ctx, kill{scenario: ScenarioRestart, system: SystemRegistrar, trial: trial, deaths: deaths,
				victim: op.proc, restart: true, serving: op.proc, scrape: httpScrape(op.metrics), queue: registrarQueue, want: len(r.l.services)})
			if err != nil {
				return err
			}
			r.record(ev)
		}
	}
	return nil
}

// restartKCM kills kube-controller-manager and starts it again, each trial twice.
func (r *restartRunner) restartKCM(ctx context.Context) error {
	for trial := 1; trial <= r.rc.Trials; trial++ {
		for _, deaths := range [][]int{nil, r.take(r.rc.Dying)} {
			ev, err := r.measure(ctx, kill{scenario: ScenarioKCMRestart, system: SystemEndpointSlice, trial: trial, deaths: deaths,
				victim: r.cl.kcm, restart: true, serving: r.cl.kcm, scrape: func(ctx context.Context) (metrics.Samples, error) {
					return scrapeHTTPS(ctx, r.cl.kcmMetrics)
				}, queue: endpointSliceQueue, want: len(r.l.services)})
			if err != nil {
				return err
			}
			r.record(ev)
		}
	}
	return nil
}

// failoverNamespace holds the fail-over pair's leader election Lease.
const failoverNamespace = "default"

// failover replaces registrar's one replica with two that elect a leader: the first started
// leads, the second is the standby. Each kill takes the leader down; the standby takes over
// and the killed one comes back as the new standby.
func (r *restartRunner) failover(ctx context.Context) error {
	r.c.Logf("fail-over: stopping the single replica, starting two with leader election")
	r.cl.operator.Stop(30 * time.Second)
	le := append([]string{"--leader-elect=true", "--leader-election-namespace=" + failoverNamespace}, r.rc.FailoverArgs...)
	leader, err := r.cl.startReplica(ctx, r.c, "registrar-a", false, le...)
	if err != nil {
		return err
	}
	r.cl.extra = append(r.cl.extra, leader.proc)
	r.cl.operator, r.cl.metrics = leader.proc, leader.metrics
	if err := r.waitLeading(ctx, leader); err != nil {
		return err
	}
	standby, err := r.cl.startReplica(ctx, r.c, "registrar-b", false, le...)
	if err != nil {
		return err
	}
	r.cl.extra = append(r.cl.extra, standby.proc)
	if err := r.waitWarm(ctx, standby.proc); err != nil {
		return err
	}
	for trial := 1; trial <= r.rc.Trials; trial++ {
		for _, deaths := range [][]int{nil, r.take(r.rc.Dying)} {
			ev, err := r.measure(ctx, kill{scenario: ScenarioFailover, system: SystemRegistrar, trial: trial, deaths: deaths,
				victim: leader.proc, serving: standby.proc, scrape: httpScrape(standby.metrics), failover: true,
				queue: registrarQueue, want: len(r.l.services)})
			if err != nil {
				return err
			}
			r.record(ev)
			// The killed leader comes back as the standby.
			if err := leader.proc.Resume(); err != nil {
				return err
			}
			if err := leader.proc.WaitHTTP(ctx, "http://"+leader.probe+"/readyz"); err != nil {
				return err
			}
			if err := r.waitWarm(ctx, leader.proc); err != nil {
				return err
			}
			leader, standby = standby, leader
			r.cl.operator, r.cl.metrics = leader.proc, leader.metrics
		}
	}
	return nil
}

func httpScrape(addr string) func(context.Context) (metrics.Samples, error) {
	return func(ctx context.Context) (metrics.Samples, error) { return metrics.Scrape(ctx, addr) }
}

// waitLeading waits until rep holds the lease and its initial list went through its queue.
func (r *restartRunner) waitLeading(ctx context.Context, rep *replica) error {
	ctx, cancel := context.WithTimeout(ctx, r.rc.SyncTimeout)
	defer cancel()
	for {
		if err := rep.proc.Exited(); err != nil {
			return err
		}
		if s, err := metrics.Scrape(ctx, rep.metrics); err == nil && leading(s) && queueOf(s, registrarQueue).synced(len(r.l.services)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not lead and sync: %w", rep.proc.Name(), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitWarm waits until a standby's start is over: at least 2 s after it answered its probe,
// its CPU use over the last second below 5 % of a core (it has listed and is watching).
func (r *restartRunner) waitWarm(ctx context.Context, p *process) error {
	start := time.Now()
	prev, err := readUsage(p.Pid())
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		u, err := readUsage(p.Pid())
		if err != nil {
			return err
		}
		if time.Since(start) >= 2*time.Second && u.CPUSeconds-prev.CPUSeconds < 0.05 {
			r.c.Logf("  %s warm after %s (%.0f MiB peak RSS)", p.Name(), time.Since(start).Round(100*time.Millisecond), u.PeakRSSMiB)
			return nil
		}
		if time.Since(start) > r.rc.SyncTimeout {
			return fmt.Errorf("%s still busy after %s", p.Name(), r.rc.SyncTimeout)
		}
		prev = u
	}
}

func (r *restartRunner) record(ev RestartEvent) {
	r.run.Events = append(r.run.Events, ev)
	synced := "not synced"
	if ev.SyncedSeconds != nil {
		synced = fmt.Sprintf("synced after %.2f s", *ev.SyncedSeconds)
	}
	r.c.Logf("%s trial %d (%d dying): %s; writes %d (for deaths %d, caused %d); API requests %d (%s); peak RSS %.0f MiB (before %.0f); "+
		"dereg p99 %.0f ms (floor %.0f ms), lost %d",
		ev.Scenario, ev.Trial, ev.Dying, synced, ev.Writes, ev.WritesForDeaths, ev.WritesCaused, ev.APIRequests, methodsCell(ev.APIByMethod),
		ev.PeakRSSMiB, ev.PeakRSSBeforeMiB, ev.Dereg.P99, ev.Floor.P99, ev.Lost)
}

// kill is one kill to measure.
type kill struct {
	scenario, system string
	trial            int
	deaths           []int
	// victim is killed; with restart it is started again and serves, else serving (a
	// standby) takes over.
	victim, serving *process
	restart         bool
	failover        bool
	// scrape reads the serving process's /metrics; queue filters its work queue's series;
	// want is the objects of its initial list.
	scrape func(context.Context) (metrics.Samples, error)
	queue  string
	want   int
}

// measure performs one kill and measures what follows.
func (r *restartRunner) measure(ctx context.Context, k kill) (RestartEvent, error) {
	r.events++
	ev := RestartEvent{Scenario: k.scenario, System: k.system, Trial: k.trial, Dying: len(k.deaths)}
	kind := "quiet"
	if len(k.deaths) > 0 {
		kind = "dying"
	}
	r.c.Logf("%s trial %d: killing %s (%s) with %d pods dying", k.scenario, k.trial, k.victim.Name(), kind, len(k.deaths))
	logDir := filepath.Join(r.c.WorkDir, fmt.Sprintf("%02d-%s-%d-%s", r.events, k.scenario, k.trial, kind))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return ev, err
	}
	trackers, h, err := r.startWatchers(ctx, logDir)
	if err != nil {
		return ev, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = h.finish()
		}
	}()
	b, err := r.before(ctx, k, &ev)
	if err != nil {
		return ev, err
	}

	// The kill.
	t0 := time.Now()
	if r.rc.Signal == syscall.SIGTERM {
		k.victim.Stop(30 * time.Second)
	} else {
		k.victim.Kill()
	}
	if k.restart {
		if err := k.victim.Resume(); err != nil {
			return ev, err
		}
	}
	deathsDone := r.die(ctx, k.deaths, trackers)
	synced := r.waitSynced(ctx, k, t0, &ev)
	ev.WriteErrors = deathsDone()
	r.waitShown(ctx, trackers)
	sleepCtx(ctx, r.rc.Tail)
	if err := ctx.Err(); err != nil {
		return ev, err
	}
	ev.WindowSeconds = time.Since(t0).Seconds()

	if err := r.after(ctx, k, b, &ev); err != nil {
		return ev, err
	}
	stopped = true
	if err := h.finish(); err != nil {
		return ev, err
	}
	r.timings(k, trackers, &ev)
	if !synced {
		r.c.Logf("WARNING: %s did not sync within %s", k.serving.Name(), r.rc.SyncTimeout)
	}
	return ev, nil
}

// startWatchers starts the timing watches of every system from the store's current revision.
func (r *restartRunner) startWatchers(ctx context.Context, logDir string) (map[string]*Tracker, *watcherHandle, error) {
	trackers := map[string]*Tracker{SystemRegistrar: NewTracker(), SystemAPIWatch: NewTracker()}
	if r.c.EndpointSlice {
		trackers[SystemEndpointSlice] = NewTracker()
	}
	rev, err := storeRevision(ctx, r.cl.storeCli)
	if err != nil {
		return nil, nil, err
	}
	h, err := startTimingWatchers(ctx, r.c.WatcherExe, logDir, watcherSpec{Kubeconfig: r.watcherKC, StoreEndpoint: r.cl.store.Endpoint(),
		StoreRevision: rev, Prefixes: map[string]string{SystemRegistrar: StorePrefix}, Pods: true, Slices: r.c.EndpointSlice}, trackers)
	return trackers, h, err
}

// readings are what is read before a kill to difference after it.
type readings struct {
	store    map[string]float64 // the store etcd's counters (registrar only; nil when unread)
	requests map[string]float64 // the standby's API requests (a restarted process starts from none)
	usage    Usage              // the standby's usage (a restarted process starts from none)
}

func (r *restartRunner) storeAddr() string {
	return strings.TrimPrefix(r.cl.store.Endpoint(), "http://")
}

// before reads the store etcd's counters, the killed process's peak and, for a standby, its
// requests and usage.
func (r *restartRunner) before(ctx context.Context, k kill, ev *RestartEvent) (readings, error) {
	b := readings{requests: map[string]float64{}}
	if k.system == SystemRegistrar {
		if s, err := metrics.Scrape(ctx, r.storeAddr()); err == nil {
			b.store = countersOf(s, storeEtcdCounters)
		} else {
			r.c.Logf("store etcd metrics: %v", err)
		}
	}
	if k.restart {
		if u, err := readUsage(k.victim.Pid()); err == nil {
			ev.PeakRSSBeforeMiB = u.PeakRSSMiB
		}
		return b, nil
	}
	s, err := k.scrape(ctx)
	if err != nil {
		return b, fmt.Errorf("standby metrics: %w", err)
	}
	b.requests = requestsByMethod(s)
	if b.usage, err = readUsage(k.serving.Pid()); err != nil {
		return b, err
	}
	ev.PeakRSSBeforeMiB = b.usage.PeakRSSMiB
	return b, nil
}

// after reads the serving process's requests and usage and the store etcd's counters.
func (r *restartRunner) after(ctx context.Context, k kill, b readings, ev *RestartEvent) error {
	if err := k.serving.Exited(); err != nil {
		return err
	}
	s, err := k.scrape(ctx)
	if err != nil {
		return fmt.Errorf("metrics after: %w", err)
	}
	ev.APIByMethod = countsBetween(b.requests, requestsByMethod(s))
	ev.APIRequests = total(ev.APIByMethod)
	u, err := readUsage(k.serving.Pid())
	if err != nil {
		return err
	}
	ev.PeakRSSMiB, ev.CPUSeconds = u.PeakRSSMiB, u.CPUSeconds-b.usage.CPUSeconds
	if b.store != nil {
		if s, err := metrics.Scrape(ctx, r.storeAddr()); err == nil {
			ev.StoreEtcd = countsBetween(b.store, countersOf(s, storeEtcdCounters))
		}
	}
	return nil
}

// die kills the pods deaths (even ones deleted, odd ones turned unready), spread evenly over
// DyingOver from now, each expected by every tracker first; the function it returns waits
// for the last write and says how many failed.
func (r *restartRunner) die(ctx context.Context, deaths []int, trackers map[string]*Tracker) func() int {
	var done sync.WaitGroup
	var failed atomic.Int64
	done.Go(func() {
		start := time.Now()
		var wg sync.WaitGroup
		for i, idx := range deaths {
			at := start.Add(time.Duration(i) * r.rc.DyingOver / time.Duration(len(deaths)))
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(at)):
			}
			p := r.l.pods[idx]
			cause := CauseDelete
			if i%2 == 1 {
				cause = CauseUnready
			}
			wg.Go(func() {
				now := time.Now()
				for _, t := range trackers {
					t.Expect(p.ID(), cause, now)
				}
				if err := r.cl.write(ctx, p, cause, now); err != nil {
					for _, t := range trackers {
						t.Cancel(p.ID())
					}
					if failed.Add(1) <= 3 {
						r.c.Logf("death not written: %v", err)
					}
				}
			})
		}
		wg.Wait()
	})
	return func() int { done.Wait(); return int(failed.Load()) }
}

// waitShown waits until every death showed in every system, or RoundTimeout.
func (r *restartRunner) waitShown(ctx context.Context, trackers map[string]*Tracker) {
	deadline := time.Now().Add(r.c.RoundTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pending := 0
		for _, t := range trackers {
			pending += t.Pending()
		}
		if pending == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling the trackers of running watchers
	}
}

// timings reads the trackers once the watchers stopped: the killed system's writes and the
// deaths' lags in every system.
func (r *restartRunner) timings(k kill, trackers map[string]*Tracker, ev *RestartEvent) {
	for _, t := range trackers {
		t.EndRound()
	}
	sys := trackers[k.system].Result(k.system)
	ev.Dereg, ev.Lost = sys.Deregistration, sys.Lost
	ev.Writes, ev.WritesForDeaths = trackers[k.system].WriteCounts()
	ev.WritesCaused = ev.Writes - ev.WritesForDeaths
	ev.Floor = trackers[SystemAPIWatch].Result(SystemAPIWatch).Deregistration
	peer := SystemEndpointSlice
	if k.system == SystemEndpointSlice {
		peer = SystemRegistrar
	}
	if t := trackers[peer]; t != nil && len(k.deaths) > 0 {
		d := t.Result(peer).Deregistration
		ev.Peer = &d
		w, e := t.WriteCounts()
		noDeath := w - e
		ev.PeerWritesNoDeath = &noDeath
	}
}

// waitSynced polls the serving process's /metrics from the kill on until its initial list
// went through its queue (false: not within SyncTimeout, or it exited), noting when it
// answered and, in a fail-over, when it led.
func (r *restartRunner) waitSynced(ctx context.Context, k kill, t0 time.Time, ev *RestartEvent) bool {
	since := func() *float64 { v := time.Since(t0).Seconds(); return &v }
	for time.Since(t0) < r.rc.SyncTimeout && ctx.Err() == nil {
		if k.serving.Exited() != nil {
			return false
		}
		s, err := k.scrape(ctx)
		if err == nil {
			if k.failover {
				if ev.LeaderSeconds == nil && leading(s) {
					ev.LeaderSeconds = since()
					ev.UpSeconds = ev.LeaderSeconds
				}
			} else if ev.UpSeconds == nil {
				ev.UpSeconds = since()
			}
			if (!k.failover || ev.LeaderSeconds != nil) && queueOf(s, k.queue).synced(k.want) {
				ev.SyncedSeconds = since()
				return true
			}
		}
		time.Sleep(100 * time.Millisecond) // polling the serving process's /metrics
	}
	return false
}

// restartWarnings flag what may make a run's figures not measure the systems.
func restartWarnings(run *RestartRun) []string {
	var w []string
	for _, ev := range run.Events {
		name := fmt.Sprintf("%s trial %d (%d dying)", ev.Scenario, ev.Trial, ev.Dying)
		if ev.SyncedSeconds == nil {
			w = append(w, name+": the serving process did not sync within the timeout")
		}
		if ev.Lost > 0 {
			w = append(w, fmt.Sprintf("%s: %d of %d deaths not shown when the window closed", name, ev.Lost, ev.Dying))
		}
		if ev.WriteErrors > 0 {
			w = append(w, fmt.Sprintf("%s: %d deaths could not be written", name, ev.WriteErrors))
		}
	}
	return w
}
