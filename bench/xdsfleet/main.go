// Command xdsfleet is the fleet-scale xDS benchmark (make bench-xds-fleet): one process of
// simulated ADS clients (real gRPC streams over loopback, ACKing every response, state of the
// world and delta, each subscribed to the Listener, RouteConfiguration, Cluster and
// ClusterLoadAssignment of a handful of services, a few to every service) against one
// control plane in a process of its own — registrar's xDS server (internal/xds) or
// go-control-plane's stock server over a LinearCache per type, fed the same resources — while
// endpoints change at a fixed rate. Per run it reports change → ACKed by every subscribed
// client (p50, p99, max), bytes sent per change, the server's CPU per change and its memory,
// and the streams that fell behind or failed.
//
// "Change" here starts when the server's publish returns (registrar: Publish of the
// registry's verdicts, as a reconcile hands them over; stock: the LinearCache update): the
// API watch and the reconcile before it are measured by make bench-xds and the sweep.
//
//	xdsfleet [flags]                       one run, its JSON to -out
//	xdsfleet -publish -out F RUN.json ...  the runs as one docs/bench envelope with its table
//	XDSFLEET_SERVE=impl,services,endpoints  the server process (started by a run)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

type config struct {
	Impl       string  `json:"impl"`
	Clients    int     `json:"clients"`
	Everything int     `json:"everything"`
	PerClient  int     `json:"per_client"`
	DeltaShare float64 `json:"delta_share"`
	Services   int     `json:"services"`
	Endpoints  int     `json:"endpoints"`
	Rate       float64 `json:"rate"`
	Duration   string  `json:"duration"`
	Seed       uint64  `json:"seed"`
}

// serveEnv names the server process: the run starts its own executable with it set to
// "impl,services,endpoints" (so the test binary can serve too, see TestMain).
const serveEnv = "XDSFLEET_SERVE"

// cpuProfileEnv, when set, has the server process profile its CPU from the first change until
// it is asked for its heap profile, into the file it names.
const cpuProfileEnv = "XDSFLEET_CPU_PROFILE"

func main() {
	if v := os.Getenv(serveEnv); v != "" {
		if err := serveFromEnv(v); err != nil {
			fmt.Fprintln(os.Stderr, "xdsfleet server:", err)
			os.Exit(1)
		}
		return
	}
	var cfg config
	var (
		publish = flag.Bool("publish", false, "Publish the run files given as arguments as one envelope (-out).")
		out     = flag.String("out", "", "Where to write the run's JSON (or, with -publish, the envelope).")
		command = flag.String("command", "make bench-xds-fleet", "With -publish: the command that produced the runs.")
		sync    = flag.Duration("sync-timeout", 5*time.Minute, "How long every client may take to receive its initial resources.")
		drain   = flag.Duration("drain", 30*time.Second, "How long to wait after the last change for every client to ACK it.")
		heap    = flag.String("heap-profile", "", "Where the server process writes a heap profile at the end of the run.")
		cpu     = flag.String("cpu-profile", "", "Where the server process writes a CPU profile of the change phase (first change to the last ACK), and its mutex contention (the same path + .mutex).")
		dur     time.Duration
	)
	flag.StringVar(&cfg.Impl, "impl", "registrar", "The control plane: registrar (internal/xds) or stock (go-control-plane server/v3 + LinearCache).")
	flag.IntVar(&cfg.Clients, "clients", 1000, "ADS clients.")
	flag.IntVar(&cfg.Everything, "everything", 10, "Clients subscribed to every service.")
	flag.IntVar(&cfg.PerClient, "per-client", 5, "Services each other client subscribes to.")
	flag.Float64Var(&cfg.DeltaShare, "delta-share", 0.3, "Share of clients that speak delta xDS (the others state of the world).")
	flag.IntVar(&cfg.Services, "services", 1000, "Services.")
	flag.IntVar(&cfg.Endpoints, "endpoints", 50000, "Endpoints over all services.")
	flag.Float64Var(&cfg.Rate, "rate", 10, "Endpoint changes per second.")
	flag.DurationVar(&dur, "duration", 30*time.Second, "How long changes are made.")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "Seed of the subscriptions and the changes.")
	flag.Parse()
	cfg.Duration = dur.String()
	var err error
	switch {
	case *publish:
		err = publishRuns(flag.Args(), *out, *command)
	default:
		var r Run
		r, err = runOne(cfg, dur, *sync, *drain, profiles{heap: *heap, cpu: *cpu})
		if err == nil {
			err = writeJSON(*out, r)
			fmt.Println(r.line())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdsfleet:", err)
		os.Exit(1)
	}
}

// Run is one run's result.
type Run struct {
	Config      config     `json:"config"`
	Date        string     `json:"date"`
	Delta       int        `json:"delta_clients"`
	SyncSeconds float64    `json:"sync_seconds"` // until every client held all its resources
	SyncMiB     float64    `json:"sync_mib"`     // bytes received until then
	Changes     int        `json:"changes"`
	Undelivered int        `json:"undelivered"` // changes some subscribed client never ACKed within the drain
	P50Ms       float64    `json:"p50_ms"`      // applied → ACKed by every subscribed client
	P99Ms       float64    `json:"p99_ms"`
	MaxMs       float64    `json:"max_ms"`
	ApplyP99Ms  float64    `json:"apply_p99_ms"` // written to the server → its publish returned
	KiBChange   float64    `json:"kib_per_change"`
	RespChange  float64    `json:"responses_per_change"`
	CPUMsChange float64    `json:"server_cpu_ms_per_change"`
	CPUSeconds  float64    `json:"server_cpu_seconds"` // during the change phase
	RSSMiB      float64    `json:"server_rss_mib"`     // at the end
	PeakMiB     float64    `json:"server_peak_rss_mib"`
	ClientCPU   float64    `json:"client_cpu_seconds"` // this process, during the change phase
	Behind      int        `json:"behind"`             // clients missing a latest change at the end
	Errors      int        `json:"stream_errors"`
	ErrorCodes  string     `json:"error_codes,omitempty"`
	ErrorSample string     `json:"error_sample,omitempty"`
	LoadBefore  [3]float64 `json:"load_before"`
	LoadAfter   [3]float64 `json:"load_after"`
}

func (r Run) line() string {
	return fmt.Sprintf("%s clients=%d rate=%g: p50 %.1f ms p99 %.1f ms max %.1f ms, %.1f KiB/change, server %.2f ms CPU/change, RSS %.0f MiB (peak %.0f), "+
		"behind %d, undelivered %d, stream errors %d %s, sync %.1f s",
		r.Config.Impl, r.Config.Clients, r.Config.Rate, r.P50Ms, r.P99Ms, r.MaxMs, r.KiBChange, r.CPUMsChange, r.RSSMiB, r.PeakMiB,
		r.Behind, r.Undelivered, r.Errors, r.ErrorCodes, r.SyncSeconds)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// profiles are where the server process writes its profiles; "" for none.
type profiles struct{ heap, cpu string }

// server is the process that serves the fleet, started by startServer.
type server struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner // its stdout after the "listening" line
	addr  string
}

// startServer starts this binary as the server process and waits until it listens.
func startServer(cfg config, prof profiles) (*server, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d", serveEnv, cfg.Impl, cfg.Services, cfg.Endpoints))
	if prof.cpu != "" {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%s", cpuProfileEnv, prof.cpu))
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server process: %w", err)
	}
	s := &server{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	addrc := make(chan string, 1)
	go func() {
		if s.lines.Scan() {
			addrc <- strings.TrimPrefix(s.lines.Text(), "listening ")
		}
		close(addrc)
	}()
	select {
	case a, ok := <-addrc:
		if !ok {
			s.stop()
			return nil, errors.New("the server process exited before it listened")
		}
		s.addr = a
	case <-time.After(5 * time.Minute):
		s.stop()
		return nil, errors.New("the server process did not listen within 5 minutes")
	}
	return s, nil
}

func (s *server) stop() {
	_ = s.stdin.Close()
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func runOne(cfg config, dur, syncTimeout, drain time.Duration, prof profiles) (Run, error) {
	r := Run{Config: cfg, Date: time.Now().UTC().Format(time.RFC3339), LoadBefore: benchfmt.LoadAvg()}
	if cfg.Rate <= 0 || int(cfg.Rate*dur.Seconds()) >= maxChanges {
		return r, errors.New("-rate × -duration must be between 1 and 16M changes")
	}
	srv, err := startServer(cfg, prof)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	cmd, stdin, lines, addr := srv.cmd, srv.stdin, srv.lines, srv.addr

	w := newWorld(cfg.Services, cfg.Endpoints)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	clients := planClients(rng, cfg.Clients, cfg.Everything, cfg.PerClient, cfg.Services, cfg.DeltaShare)
	for _, c := range clients {
		if c.delta {
			r.Delta++
		}
	}
	t := newTracker(clients, cfg.Services)
	f, err := dialFleet(addr, cfg.Clients)
	if err != nil {
		return r, err
	}
	defer f.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		t.stopped.Store(true)
		cancel()
		f.wg.Wait()
	}()
	start := time.Now()
	f.start(ctx, w, clients, t)
	select {
	case <-t.syncCh:
	case <-time.After(syncTimeout):
		t.mu.Lock()
		synced := t.synced
		t.mu.Unlock()
		return r, fmt.Errorf("%d of %d clients held their resources after %s (stream errors: %v)", synced, cfg.Clients, syncTimeout, t.errs)
	}
	r.SyncSeconds = time.Since(start).Seconds()
	r.SyncMiB = float64(t.bytes.Load()) / (1 << 20)

	// The change phase.
	bytes0, resps0 := t.bytes.Load(), t.resps.Load()
	cpu0, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	self0 := selfCPU()
	go func() {
		for lines.Scan() {
			fs := strings.Fields(lines.Text())
			if len(fs) == 2 && fs[0] == "heap" {
				t.heapWritten()
			}
			if len(fs) == 3 && fs[0] == "applied" {
				k, _ := strconv.Atoi(fs[1])
				ns, _ := strconv.ParseInt(fs[2], 10, 64)
				t.applied(k, time.Unix(0, ns))
			}
		}
	}()
	n := int(cfg.Rate * dur.Seconds())
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	bw := bufio.NewWriter(stdin)
	next := time.Now()
	for k := range n {
		if d := time.Until(next); d > 0 {
			time.Sleep(d) // pacing the load generator, not synchronisation
		}
		next = next.Add(interval)
		svc, slot := rng.IntN(cfg.Services), rng.IntN(w.perService)
		t.issue(k, svc, time.Now())
		fmt.Fprintf(bw, "change %d %d %d\n", k, svc, slot)
		if err := bw.Flush(); err != nil {
			return r, fmt.Errorf("the server process: %w", err)
		}
	}
	t.waitDone(drain)
	cpu1, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	r.ClientCPU = selfCPU() - self0
	r.RSSMiB, r.PeakMiB, err = procMem(cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	r.LoadAfter = benchfmt.LoadAvg()
	if prof.heap != "" || prof.cpu != "" {
		if err := askHeap(bw, t, prof.heap); err != nil {
			return r, err
		}
	}
	t.stopped.Store(true)
	r.Behind = t.behind()
	r.CPUSeconds = cpu1 - cpu0
	t.summarize(&r, bytes0, resps0)
	return r, nil
}

// summarize fills in the run's figures from what the tracker followed.
func (t *tracker) summarize(r *Run, bytes0, resps0 int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lat, apply []float64
	for _, ch := range t.changes {
		r.Changes++
		if !ch.applied.IsZero() {
			apply = append(apply, ms(ch.applied.Sub(ch.issued)))
		}
		if ch.pending > 0 || ch.applied.IsZero() {
			if ch.pending > 0 {
				r.Undelivered++
			}
			continue
		}
		if t.subs[ch.svc] == 0 {
			continue
		}
		lat = append(lat, max(0, ms(ch.done.Sub(ch.applied))))
	}
	r.P50Ms, r.P99Ms, r.MaxMs = pct(lat, 0.50), pct(lat, 0.99), pct(lat, 1)
	r.ApplyP99Ms = pct(apply, 0.99)
	if r.Changes > 0 {
		r.KiBChange = float64(t.bytes.Load()-bytes0) / 1024 / float64(r.Changes)
		r.RespChange = float64(t.resps.Load()-resps0) / float64(r.Changes)
		r.CPUMsChange = r.CPUSeconds * 1000 / float64(r.Changes)
	}
	for code, c := range t.errs {
		r.Errors += c
		r.ErrorCodes += fmt.Sprintf("%s:%d ", code, c)
	}
	r.ErrorCodes = strings.TrimSpace(r.ErrorCodes)
	r.ErrorSample = t.sample
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the q-quantile of xs (nearest rank; 0 for none).
func pct(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// procCPU is a process's user + system CPU seconds (/proc/PID/stat, 100 ticks a second).
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the server's CPU: %w", err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "(comm) "
	if len(f) < 13 {
		return 0, errors.New("short /proc stat line")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (ut + st) / 100, nil
}

// procMem is a process's resident and peak resident memory in MiB.
func procMem(pid int) (rss, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read the server's memory: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak, nil
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// askHeap has the server process end its CPU profile, if any, and write a heap profile to
// path ("" for none), and waits for it.
func askHeap(bw *bufio.Writer, t *tracker, path string) error {
	heapc := make(chan struct{})
	t.onHeap(heapc)
	if path == "" {
		path = "-"
	}
	fmt.Fprintf(bw, "heap %s\n", path)
	if err := bw.Flush(); err != nil {
		return err
	}
	select {
	case <-heapc:
		return nil
	case <-time.After(time.Minute):
		return errors.New("the server process wrote no heap profile within a minute")
	}
}
