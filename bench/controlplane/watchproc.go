package controlplane

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The timing watchers run apart from the harness's writers: in their own process (the bench
// command re-executed with WatcherArg) when Config.WatcherExe is set, otherwise in the harness
// process; either way every watch has its own connection (its own client and transport, no
// client-side rate limiter), so no system is timed through a connection the writers share.
// They report each observation as one line, stamped when the watcher received it:
//
//	<system> <unix nanoseconds> <op> <namespace/pod>
//
// op is R (registered), D (deregistered), d (deregistered if a transition is pending: a pod
// delete shows as several events), g and G (registered and deregistered in a gap of the watch,
// found by a relist: the time is unknown), U (a write that matches no pod), W (a write the
// system made, counted but not matched), C (the watch ended and resumed from its last
// position) or L (it lost its position and listed again); the last four name no pod ("-"). Control lines: "READY" once every watch is established,
// "STATS <json>" (the watcher's own scheduling lag and CPU) when it stops.

// WatcherArg is the first argument that makes the bench command a watcher process.
const WatcherArg = "watch"

// watcherSpec is what the watcher watches.
type watcherSpec struct {
	Kubeconfig    string
	StoreEndpoint string
	// Prefixes maps a system name to the store prefix its keys live under.
	Prefixes      map[string]string
	Pods, Slices  bool
	StoreRevision int64
	// FaultCut and FaultRelist are Config.FaultWatchCut and FaultWatchRelist.
	FaultCut, FaultRelist time.Duration
}

func (s watcherSpec) args() []string {
	out := make([]string, 0, 8+len(s.Prefixes))
	out = append(out, WatcherArg, "-kubeconfig="+s.Kubeconfig, "-store="+s.StoreEndpoint,
		"-store-revision="+strconv.FormatInt(s.StoreRevision, 10),
		"-pods="+strconv.FormatBool(s.Pods), "-slices="+strconv.FormatBool(s.Slices),
		"-fault-cut="+s.FaultCut.String(), "-fault-relist="+s.FaultRelist.String())
	for name, prefix := range s.Prefixes {
		out = append(out, "-prefix="+name+"="+prefix)
	}
	return out
}

type prefixFlag map[string]string

func (p prefixFlag) String() string { return fmt.Sprint(map[string]string(p)) }
func (p prefixFlag) Set(v string) error {
	name, prefix, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want system=prefix, got %q", v)
	}
	p[name] = prefix
	return nil
}

// WatcherMain is the watcher process: it runs until SIGTERM or stdin closes.
func WatcherMain(args []string) error {
	spec := watcherSpec{Prefixes: map[string]string{}}
	fs := flag.NewFlagSet(WatcherArg, flag.ContinueOnError)
	fs.StringVar(&spec.Kubeconfig, "kubeconfig", "", "kubeconfig of the watcher")
	fs.StringVar(&spec.StoreEndpoint, "store", "", "store etcd endpoint")
	fs.Int64Var(&spec.StoreRevision, "store-revision", 0, "store revision to watch from")
	fs.BoolVar(&spec.Pods, "pods", true, "watch pods (apiwatch)")
	fs.BoolVar(&spec.Slices, "slices", false, "watch EndpointSlices")
	fs.Var(prefixFlag(spec.Prefixes), "prefix", "system=store prefix (repeatable)")
	fs.DurationVar(&spec.FaultCut, "fault-cut", 0, "cut every timing watch this often (0: never)")
	fs.DurationVar(&spec.FaultRelist, "fault-relist", 0, "make every timing watch lose its position and relist this often (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the harness closes our stdin (or dies) to stop us
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	out := bufio.NewWriter(os.Stdout)
	err := runWatchers(ctx, spec, out)
	_ = out.Flush()
	return err
}

// ownConnection copies cfg so that clients made from it get a transport (and so a TCP/HTTP/2
// connection) of their own: client-go shares transports between configs with equal TLS
// settings unless a dialer is set. It also removes the client-side rate limiter.
func ownConnection(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	cfg.Timeout = 0 // watches are long
	return cfg
}

// lineWriter serialises observation lines from several watches.
type lineWriter struct {
	mu  sync.Mutex
	out *bufio.Writer
}

func (w *lineWriter) emit(system string, at time.Time, op byte, pod string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.out, "%s %d %c %s\n", system, at.UnixNano(), op, pod)
	_ = w.out.Flush()
}

func (w *lineWriter) control(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintln(w.out, line)
	_ = w.out.Flush()
}

// sink adapts a system's watch to the line protocol (it has the Tracker's observer methods).
type sink struct {
	w      *lineWriter
	system string
}

func (s sink) Observe(pod string, k Kind, at time.Time) {
	op := byte('R')
	if k == Deregister {
		op = 'D'
	}
	s.w.emit(s.system, at, op, pod)
}
func (s sink) ObserveIfPending(pod string, _ Kind, at time.Time) { s.w.emit(s.system, at, 'd', pod) }
func (s sink) Unexpected()                                       { s.w.emit(s.system, time.Now(), 'U', "-") }
func (s sink) Write()                                            { s.w.emit(s.system, time.Now(), 'W', "-") }
func (s sink) Resumed()                                          { s.w.emit(s.system, time.Now(), 'C', "-") }
func (s sink) Relisted()                                         { s.w.emit(s.system, time.Now(), 'L', "-") }
func (s sink) Gap(pod string, k Kind) {
	op := byte('g')
	if k == Deregister {
		op = 'G'
	}
	s.w.emit(s.system, time.Now(), op, pod)
}

// observer is what a watch reports to: a Tracker in-process, a sink in the watcher.
type observer interface {
	Observe(pod string, k Kind, at time.Time)
	ObserveIfPending(pod string, k Kind, at time.Time)
	Unexpected()
	Write()
	// Gap: the system showed kind for pod while the watch was not watching.
	Gap(pod string, k Kind)
	Resumed()
	Relisted()
}

// WatcherStats is the watcher's own health over the run: if its scheduling lag is large, the
// lags it reports include its own.
type WatcherStats struct {
	SchedLag   LagStats `json:"schedLag"`
	CPUSeconds float64  `json:"cpuSeconds"`
}

// runWatchers establishes every watch of spec, writes READY, then streams observations to out
// until ctx ends, and finally writes STATS.
func runWatchers(ctx context.Context, spec watcherSpec, out *bufio.Writer) error {
	w := &lineWriter{out: out}
	cfg, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		return fmt.Errorf("watcher kubeconfig: %w", err)
	}
	cfg = withProtobuf(cfg)
	lag := startSchedLag(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	faults := startFaults(ctx, spec.FaultCut, spec.FaultRelist)
	errs := make(chan error, len(spec.Prefixes)+2)
	n := 0
	run := func(fn func() error) {
		n++
		go func() { errs <- fn() }()
	}
	for name, prefix := range spec.Prefixes {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{spec.StoreEndpoint}, DialTimeout: 10 * time.Second})
		if err != nil {
			return fmt.Errorf("store client for %s: %w", name, err)
		}
		defer cli.Close()
		fn, err := startStoreWatch(ctx, cli, prefix, spec.StoreRevision, sink{w, name}, faults.watch())
		if err != nil {
			return err
		}
		run(fn)
	}
	if spec.Pods {
		kube, err := kubernetes.NewForConfig(ownConnection(cfg))
		if err != nil {
			return err
		}
		fn, err := startPodWatch(ctx, kube, sink{w, SystemAPIWatch}, faults.watch())
		if err != nil {
			return err
		}
		run(fn)
	}
	if spec.Slices {
		kube, err := kubernetes.NewForConfig(ownConnection(cfg))
		if err != nil {
			return err
		}
		fn, err := startSliceWatch(ctx, kube, sink{w, SystemEndpointSlice}, faults.watch())
		if err != nil {
			return err
		}
		run(fn)
	}
	w.control("READY")
	var all []error
	for range n {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
			all = append(all, err)
			cancel()
		}
	}
	st := WatcherStats{SchedLag: lag()}
	if u, err := readUsage(os.Getpid()); err == nil {
		st.CPUSeconds = u.CPUSeconds
	}
	data, _ := json.Marshal(st)
	w.control("STATS " + string(data))
	return errors.Join(all...)
}

// startSchedLag measures how late this process's goroutines run: a loop sleeping 10 ms records
// how much longer each sleep took. The function it returns stops it and summarises.
func startSchedLag(ctx context.Context) func() LagStats {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var lags []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		const tick = 10 * time.Millisecond
		for ctx.Err() == nil {
			start := time.Now()
			time.Sleep(tick) // the measurement itself: how late the sleep returns
			mu.Lock()
			lags = append(lags, max(time.Since(start)-tick, 0))
			mu.Unlock()
		}
	}()
	return func() LagStats {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return Summarise(lags)
	}
}

// watcherHandle is the harness's side of the watchers.
type watcherHandle struct {
	trackers map[string]*Tracker
	stats    WatcherStats
	ready    chan struct{}
	done     chan error
	stop     func()
	pid      int
	// exited is set when the watchers' stream ended (they failed, or were stopped).
	exited atomic.Bool
}

// running reports an error when the watchers stopped before the harness stopped them.
func (h *watcherHandle) running() error {
	if h.exited.Load() {
		return fmt.Errorf("the timing watchers stopped (see watcher.log in the work directory)")
	}
	return nil
}

// startTimingWatchers starts the watchers of spec (a process when exe is set) and feeds their
// lines into trackers. It returns once every watch is established.
func startTimingWatchers(ctx context.Context, exe, logDir string, spec watcherSpec, trackers map[string]*Tracker) (*watcherHandle, error) {
	h := &watcherHandle{trackers: trackers, ready: make(chan struct{}), done: make(chan error, 1)}
	var lines io.Reader
	if exe != "" {
		cmd := exec.Command(exe, spec.args()...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		logf, err := os.Create(logDir + "/watcher.log")
		if err != nil {
			return nil, err
		}
		cmd.Stderr = logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start watcher process: %w", err)
		}
		h.pid = cmd.Process.Pid
		lines = stdout
		exited := make(chan struct{})
		h.stop = func() {
			_ = stdin.Close()
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
			}
			_ = logf.Close()
		}
		go func() {
			err := h.read(lines)
			werr := cmd.Wait()
			close(exited)
			h.done <- errors.Join(err, werr)
		}()
	} else {
		pr, pw := io.Pipe()
		wctx, cancel := context.WithCancel(ctx)
		runErr := make(chan error, 1)
		go func() {
			bw := bufio.NewWriter(pw)
			err := runWatchers(wctx, spec, bw)
			_ = bw.Flush()
			_ = pw.Close()
			runErr <- err
		}()
		h.stop = cancel
		go func() {
			err := h.read(pr)
			h.done <- errors.Join(err, <-runErr)
		}()
	}
	select {
	case <-h.ready:
		return h, nil
	case err := <-h.done:
		return nil, fmt.Errorf("watchers stopped before they were ready: %w", err)
	case <-ctx.Done():
		h.stop()
		return nil, ctx.Err()
	case <-time.After(2 * time.Minute):
		h.stop()
		return nil, fmt.Errorf("watchers not ready after 2 minutes")
	}
}

// read applies the watcher's lines to the trackers until the stream ends.
func (h *watcherHandle) read(r io.Reader) error {
	defer h.exited.Store(true)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "READY":
			close(h.ready)
			continue
		case strings.HasPrefix(line, "STATS "):
			if err := json.Unmarshal([]byte(line[len("STATS "):]), &h.stats); err != nil {
				return fmt.Errorf("watcher stats %q: %w", line, err)
			}
			continue
		}
		if err := applyLine(line, h.trackers); err != nil {
			return err
		}
	}
	return sc.Err()
}

// applyLine applies one observation line to its system's tracker.
func applyLine(line string, trackers map[string]*Tracker) error {
	f := strings.Fields(line)
	if len(f) != 4 || len(f[2]) != 1 {
		return fmt.Errorf("malformed watcher line %q", line)
	}
	t := trackers[f[0]]
	if t == nil {
		return nil // a system not timed in this run
	}
	nanos, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return fmt.Errorf("malformed watcher time in %q", line)
	}
	at := time.Unix(0, nanos)
	switch f[2][0] {
	case 'R':
		t.Observe(f[3], Register, at)
	case 'D':
		t.Observe(f[3], Deregister, at)
	case 'd':
		t.ObserveIfPending(f[3], Deregister, at)
	case 'g':
		t.Gap(f[3], Register)
	case 'G':
		t.Gap(f[3], Deregister)
	case 'C':
		t.Resumed()
	case 'L':
		t.Relisted()
	case 'U':
		t.Unexpected()
	case 'W':
		t.Write()
	default:
		return fmt.Errorf("unknown op in watcher line %q", line)
	}
	return nil
}

// finish stops the watchers and waits for their last lines.
func (h *watcherHandle) finish() error {
	h.stop()
	select {
	case err := <-h.done:
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("watchers did not stop")
	}
}
