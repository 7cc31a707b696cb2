package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/bench/benchfmt"
	"github.com/registrar-dev/registrar/bench/controlplane"
	"github.com/registrar-dev/registrar/internal/xds"
	"github.com/registrar-dev/registrar/test/support/ports"
)

// Config is one run.
type Config struct {
	Pods int `json:"pods"`
	// SurgePercent is the Deployment's maxSurge (maxUnavailable is 0).
	SurgePercent float64 `json:"maxSurgePercent"`
	// XDSClients are the simulated proxyless gRPC clients, DeltaClients of them delta xDS.
	XDSClients   int `json:"xdsClients"`
	DeltaClients int `json:"deltaClients"`
	// Watchers are the pkg/discovery Clients of the service.
	Watchers int `json:"watchers"`
	// Rate is the API writes per second the rollout makes (creations, readiness, deletions).
	Rate float64 `json:"rate"`
	// Grace is how long an old pod stays terminating before the kubelet deletes it.
	Grace time.Duration `json:"grace"`
	// Reconciles is the operator's --max-concurrent-reconciles.
	Reconciles int `json:"reconciles"`

	Operator       string               `json:"-"`
	WorkDir        string               `json:"-"`
	ProfileDir     string               `json:"-"`
	ProfileSeconds int                  `json:"-"`
	SyncTimeout    time.Duration        `json:"-"`
	StepTimeout    time.Duration        `json:"-"`
	Drain          time.Duration        `json:"-"`
	Logf           func(string, ...any) `json:"-"`
}

func (c *Config) defaults() {
	if c.SurgePercent <= 0 {
		c.SurgePercent = 25
	}
	if c.Grace <= 0 {
		c.Grace = 2 * time.Second
	}
	if c.Reconciles <= 0 {
		c.Reconciles = 8
	}
	if c.SyncTimeout <= 0 {
		c.SyncTimeout = 5 * time.Minute
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 5 * time.Minute
	}
	if c.Drain <= 0 {
		c.Drain = 2 * time.Minute
	}
	if c.ProfileSeconds <= 0 {
		c.ProfileSeconds = 60
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// ModeBytes are what the xDS clients of one mode received over the rollout.
type ModeBytes struct {
	Clients int `json:"clients"`
	// Bytes of every response (proto.Size), EDSBytes of the ClusterLoadAssignment responses.
	Bytes    int64 `json:"bytes"`
	EDSBytes int64 `json:"edsBytes"`
	// EDSResponses received (pushes of the assignment), over all clients of the mode.
	EDSResponses int64 `json:"edsResponses"`
}

// Run is one run's result.
type Run struct {
	Config     Config     `json:"config"`
	Date       string     `json:"date"`
	LoadBefore [3]float64 `json:"loadBefore"`
	LoadAfter  [3]float64 `json:"loadAfter"`

	// Transitions are the pod transitions of the rollout: Ready new pods and Terminating old
	// ones (their final deletion, Grace later, is not counted, though its push is in the bytes).
	Ready          int     `json:"ready"`
	Terminating    int     `json:"terminating"`
	Transitions    int     `json:"transitions"`
	RolloutSeconds float64 `json:"rolloutSeconds"` // first write → every observer converged
	SetupSeconds   float64 `json:"setupSeconds"`
	WriteErrors    int     `json:"writeErrors"`

	SotwBytes  ModeBytes `json:"sotwBytes"`
	DeltaBytes ModeBytes `json:"deltaBytes"`
	// AssignmentBytes is the ClusterLoadAssignment of the service with every pod HEALTHY, as
	// the clients held it before the rollout (the size one push of it costs).
	AssignmentBytes int64 `json:"assignmentBytes"`
	// WatchBytes is what the discovery watchers' etcd clients received from the store
	// (watch events, progress, heartbeats: every gRPC message) over the rollout.
	WatchBytes int64 `json:"watchBytes"`

	OperatorCPUSeconds float64 `json:"operatorCpuSeconds"`
	OperatorPeakRSSMiB float64 `json:"operatorPeakRssMiB"`
	OperatorRSSMiB     float64 `json:"operatorRssMiB"`
	HarnessCPUSeconds  float64 `json:"harnessCpuSeconds"`  // this process: the xDS clients and the kubelet's writes
	WatchersCPUSeconds float64 `json:"watchersCpuSeconds"` // the watchers' process

	// Write → every observer of the set had it.
	Floor    KindTails `json:"floor"`
	XDS      KindTails `json:"xds"` // every xDS client, both modes
	XDSSotw  KindTails `json:"xdsSotw"`
	XDSDelta KindTails `json:"xdsDelta"`
	Watchers KindTails `json:"watchers"`

	// At the end: clients and watchers holding exactly the new pods (and nothing draining).
	XDSConverged      int    `json:"xdsConverged"`
	WatchersConverged int    `json:"watchersConverged"`
	StreamErrors      int    `json:"streamErrors"`
	StreamError       string `json:"streamError,omitempty"`
	Pending           int    `json:"pending"` // transitions some observer never had
	CPUProfile        string `json:"cpuProfile,omitempty"`
}

// KindTails are the tails of ready and terminating transitions.
type KindTails struct {
	Ready       Tails `json:"ready"`
	Terminating Tails `json:"terminating"`
}

func (t *tracker) kindTails(gs ...group) KindTails {
	return KindTails{Ready: t.tails(ready, gs...), Terminating: t.tails(terminating, gs...)}
}

// storePrefix is where the operator writes the service's keys (its default --store-prefix).
var storePrefix = controlplane.StorePrefix + service + "/" + namespace + "/"

// runOne runs one rollout.
func runOne(ctx context.Context, c Config) (*Run, error) {
	c.defaults()
	r := &Run{Config: c, Date: time.Now().UTC().Format(time.RFC3339), LoadBefore: benchfmt.LoadAvg()}
	if c.Pods <= 0 || c.XDSClients < 0 || c.DeltaClients > c.XDSClients || c.Watchers < 0 {
		return nil, fmt.Errorf("pods %d, xDS clients %d (%d delta), watchers %d: want pods > 0 and delta ≤ clients", c.Pods, c.XDSClients, c.DeltaClients, c.Watchers)
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime's logger
	progressf = c.Logf
	setupStart := time.Now()
	xdsAddr, err := ports.FreeLoopback()
	if err != nil {
		return nil, err
	}
	cl, err := controlplane.StartCluster(ctx, controlplane.Config{
		WorkDir: c.WorkDir, Operator: c.Operator, Reconciles: c.Reconciles, ProfileDir: c.ProfileDir,
		OperatorArgs: []string{"--xds-bind-address=" + xdsAddr}, Logf: c.Logf,
	})
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	k := &kubelet{kube: cl.Kube(), inFlight: 32}
	p := newPlan(c.Pods, surgeOf(c.Pods, c.SurgePercent))
	if err := createService(ctx, cl); err != nil {
		return nil, err
	}
	c.Logf("creating %d ready pods of revision 1", c.Pods)
	k.paced(ctx, c.Pods, func(ctx context.Context, i int) error { return k.create(ctx, p.old[i], podIP(1, i), 1, true) })
	if k.errs.n > 0 {
		return nil, fmt.Errorf("%d pod creations failed: %w", k.errs.n, k.errs.first)
	}
	if err := waitStoreKeys(ctx, cl.StoreClient(), c.Pods, c.SyncTimeout); err != nil {
		return nil, err
	}

	// The watchers' process reports a change once all its watchers have it: one observer.
	t := newTracker([groups]int{groupFloor: 1, groupSotw: c.XDSClients - c.DeltaClients, groupDelta: c.DeltaClients, groupWatchers: min(c.Watchers, 1)})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := floorWatch(rctx, cl.Kube(), namespace, t); err != nil {
		return nil, err
	}
	clients, conns, err := startClients(rctx, xdsAddr, c, t)
	defer func() {
		cancel()
		for _, cc := range conns {
			_ = cc.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	var wp *watcherProc
	if c.Watchers > 0 {
		c.Logf("starting %d discovery watchers", c.Watchers)
		if wp, err = startWatcherProc(cl.StoreEndpoint(), c.Watchers, t, c.SyncTimeout, filepath.Join(c.WorkDir, "watchers.log")); err != nil {
			return nil, err
		}
		defer wp.stop()
	}
	c.Logf("waiting for %d xDS clients and %d watchers to hold the %d pods", c.XDSClients, c.Watchers, c.Pods)
	if err := waitFor(ctx, c.SyncTimeout, func() (bool, string) { return synced(clients, wp, c.Watchers, p.old, "") }); err != nil {
		return nil, fmt.Errorf("initial sync: %w", err)
	}
	r.SetupSeconds = time.Since(setupStart).Seconds()
	for _, x := range clients {
		r.AssignmentBytes = max(r.AssignmentBytes, x.lastEDS.Load())
	}

	// The measured rollout.
	op := cl.Operator().Pid()
	u0, err := controlplane.ReadUsage(op)
	if err != nil {
		return nil, err
	}
	self0 := selfCPU()
	b0 := clientBytes(clients)
	w0, wcpu0, err := wp.usage(c.Pods)
	if err != nil {
		return nil, err
	}
	profileDone := startProfile(ctx, cl.PprofAddr(), c, r)
	start := time.Now()
	k.rate = c.Rate
	if err := roll(ctx, c, k, p, t); err != nil {
		return nil, err
	}
	c.Logf("waiting for every client and watcher to hold the %d new pods", c.Pods)
	convErr := waitFor(ctx, c.Drain, func() (bool, string) { return synced(clients, wp, c.Watchers, p.new, newPrefix) })
	r.RolloutSeconds = time.Since(start).Seconds()
	u1, err := controlplane.ReadUsage(op)
	if err != nil {
		return nil, err
	}
	r.HarnessCPUSeconds = selfCPU() - self0
	b1 := clientBytes(clients)
	w1, wcpu1, err := wp.usage(c.Pods)
	if err != nil {
		return nil, err
	}
	r.WatchBytes, r.WatchersCPUSeconds = w1-w0, wcpu1-wcpu0
	r.LoadAfter = benchfmt.LoadAvg()
	profileDone()

	r.OperatorCPUSeconds = u1.CPUSeconds - u0.CPUSeconds
	r.OperatorPeakRSSMiB, r.OperatorRSSMiB = u1.PeakRSSMiB, u1.RSSMiB
	r.WriteErrors = k.errs.n
	r.Ready, r.Terminating = len(p.new), len(p.old)
	r.Transitions = r.Ready + r.Terminating
	r.Floor = t.kindTails(groupFloor)
	r.XDS = t.kindTails(groupSotw, groupDelta)
	r.SotwBytes, r.DeltaBytes = b1[0].minus(b0[0]), b1[1].minus(b0[1])
	r.SotwBytes.Clients, r.DeltaBytes.Clients = c.XDSClients-c.DeltaClients, c.DeltaClients
	r.XDSSotw, r.XDSDelta = t.kindTails(groupSotw), t.kindTails(groupDelta)
	r.Watchers = t.kindTails(groupWatchers)
	r.Pending = t.pending()
	for _, x := range clients {
		if _, _, err := x.snapshot(); err != nil {
			r.StreamErrors++
			if r.StreamError == "" {
				r.StreamError = err.Error()
			}
		}
	}
	r.XDSConverged, r.WatchersConverged = converged(clients, wp, p.new, newPrefix)
	if k.errs.n > 0 {
		c.Logf("%d API writes failed, first: %v", k.errs.n, k.errs.first)
	}
	if convErr != nil {
		c.Logf("not converged: %v", convErr)
	}
	return r, nil
}

func (m ModeBytes) minus(o ModeBytes) ModeBytes {
	return ModeBytes{Bytes: m.Bytes - o.Bytes, EDSBytes: m.EDSBytes - o.EDSBytes, EDSResponses: m.EDSResponses - o.EDSResponses}
}

// roll makes the rollout's API writes, step by step: the new pods created, then ready (each a
// transition), then as many old pods terminating (each a transition), deleted for good a grace
// later (at the next step's start, or at the end).
func roll(ctx context.Context, c Config, k *kubelet, p plan, t *tracker) error {
	var gone []string // old pods terminating, to be deleted for good
	var terminatedAt time.Time
	finish := func() {
		if len(gone) == 0 {
			return
		}
		if d := c.Grace - time.Since(terminatedAt); d > 0 {
			time.Sleep(d) // the terminating pods' grace, as the kubelet's preStop would take
		}
		g := gone
		k.paced(ctx, len(g), func(ctx context.Context, i int) error { return k.gone(ctx, g[i]) })
		gone = nil
	}
	for s, step := range p.steps {
		from, to := step[0], step[1]
		c.Logf("step %d/%d: pods %d–%d", s+1, len(p.steps), from, to-1)
		k.paced(ctx, to-from, func(ctx context.Context, i int) error {
			return k.create(ctx, p.new[from+i], podIP(2, from+i), 2, false)
		})
		finish()
		k.paced(ctx, to-from, func(ctx context.Context, i int) error {
			tr := t.issue(p.new[from+i], ready)
			t.wrote(tr, time.Now())
			return k.markReady(ctx, p.new[from+i])
		})
		if err := waitFor(ctx, c.StepTimeout, func() (bool, string) {
			return t.complete(groupFloor, ready, p.new[from:to]), "the API watch to show the new pods ready"
		}); err != nil {
			return err
		}
		k.paced(ctx, to-from, func(ctx context.Context, i int) error {
			tr := t.issue(p.old[from+i], terminating)
			t.wrote(tr, time.Now())
			return k.terminate(ctx, p.old[from+i])
		})
		if err := waitFor(ctx, c.StepTimeout, func() (bool, string) {
			return t.complete(groupFloor, terminating, p.old[from:to]), "the API watch to show the old pods terminating"
		}); err != nil {
			return err
		}
		gone, terminatedAt = p.old[from:to], time.Now()
	}
	finish()
	return nil
}

// clientBytes sums what the clients received so far, state of the world [0] and delta [1].
func clientBytes(clients []*xdsClient) [2]ModeBytes {
	var out [2]ModeBytes
	for _, x := range clients {
		i := 0
		if x.delta {
			i = 1
		}
		out[i].Bytes += x.bytes.Load()
		out[i].EDSBytes += x.edsBytes.Load()
		out[i].EDSResponses += x.edsResps.Load()
	}
	return out
}

func startClients(ctx context.Context, addr string, c Config, t *tracker) ([]*xdsClient, []*grpc.ClientConn, error) {
	dec := newDecoded()
	var clients []*xdsClient
	var conns []*grpc.ClientConn
	name := xds.ResourceName(service, namespace)
	for i := range c.XDSClients {
		// Delta clients are spread among the others (every k-th client).
		delta := c.DeltaClients > 0 && (i*c.DeltaClients)%c.XDSClients < c.DeltaClients
		x := &xdsClient{id: i, delta: delta, name: name}
		conn, err := dialClient(addr, i)
		if err != nil {
			return clients, conns, err
		}
		conns = append(conns, conn)
		clients = append(clients, x)
		go x.run(ctx, conn, dec, t)
	}
	return clients, conns, nil
}

func createService(ctx context.Context, cl *controlplane.Cluster) error {
	kube := cl.Kube()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: service},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{appLabel: service}},
			Ports:    []v1beta1.ServicePort{{Name: portName, Port: 8080}},
		},
	}
	if err := cl.Client().Create(ctx, reg); err != nil {
		return fmt.Errorf("create ServiceRegistry: %w", err)
	}
	return nil
}

// waitStoreKeys waits until the store holds n keys of the service.
func waitStoreKeys(ctx context.Context, cli *clientv3.Client, n int, timeout time.Duration) error {
	return waitFor(ctx, timeout, func() (bool, string) {
		resp, err := cli.Get(ctx, storePrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return false, err.Error()
		}
		return resp.Count == int64(n), fmt.Sprintf("the store to hold %d keys (%d)", n, resp.Count)
	})
}

// progressf, when set, receives what a long wait still waits for.
var progressf func(string, ...any)

// waitFor polls ok every 200 ms until it holds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, ok func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	report := time.Now().Add(30 * time.Second)
	for {
		done, what := ok()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", timeout, what)
		}
		if time.Now().After(report) && progressf != nil {
			progressf("still waiting for %s", what)
			report = time.Now().Add(30 * time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond): // polling what the observers hold
		}
	}
}

// newPrefix names the pods of revision 2 (newPlan).
var newPrefix = service + "-v2-"

// synced tells whether every xDS client holds pods HEALTHY and every watcher lists len(pods)
// pods; with prefix (the final check) nothing else: no DRAINING endpoint left, every listed
// pod named with prefix.
func synced(clients []*xdsClient, wp *watcherProc, watchers int, pods []string, prefix string) (bool, string) {
	x, w := converged(clients, wp, pods, prefix)
	if prefix == "" {
		x = 0
		for _, c := range clients {
			if a, has, _ := c.snapshot(); has && len(a.healthy) == len(pods) {
				x++
			}
		}
	}
	return x == len(clients) && w == watchers,
		fmt.Sprintf("%d of %d xDS clients and %d of %d watchers to hold the %d pods", x, len(clients), w, watchers, len(pods))
}

// converged counts the clients holding exactly pods HEALTHY and nothing else, and the
// watchers listing len(pods) pods named with prefix.
func converged(clients []*xdsClient, wp *watcherProc, pods []string, prefix string) (int, int) {
	want := map[string]bool{}
	for _, p := range pods {
		want[p] = true
	}
	x := 0
	for _, c := range clients {
		a, has, _ := c.snapshot()
		if has && a.endpoints == len(pods) && len(a.healthy) == len(pods) && allIn(a.healthy, want) {
			x++
		}
	}
	w := 0
	if wp != nil {
		w, _, _ = wp.count(prefix, len(pods))
	}
	return x, w
}

func allIn(names []string, set map[string]bool) bool {
	for _, n := range names {
		if !set[n] {
			return false
		}
	}
	return true
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// startProfile fetches the operator's CPU profile from now on (ProfileSeconds long) when
// profiles are asked for; the function it returns waits for it.
func startProfile(ctx context.Context, addr string, c Config, r *Run) func() {
	if c.ProfileDir == "" || addr == "" {
		return func() {}
	}
	path := filepath.Join(c.ProfileDir, "registrar-cpu.pprof")
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, c.ProfileSeconds), path,
			time.Duration(c.ProfileSeconds+30)*time.Second); err != nil {
			c.Logf("CPU profile: %v", err)
			return
		}
		r.CPUProfile = path
	})
	return wg.Wait
}

func fetch(ctx context.Context, url, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}
