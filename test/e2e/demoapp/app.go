package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config is what the demo service is told on its command line.
type Config struct {
	Pod      string // X-Pod header and "pod" field: $POD_NAME, else the hostname
	Hostname string

	WorkDelay          time.Duration // how long "/" works before it answers
	ReadyAfter         time.Duration // /ready answers 503 until this long after start
	FailReadyOnSigterm bool          // /ready answers 503 once SIGTERM has arrived
	ShutdownGrace      time.Duration // keep accepting requests this long after SIGTERM
	ShutdownTimeout    time.Duration // bound on http.Server.Shutdown (in-flight requests); 0: 10s

	// OnSigterm, when set, runs once right after the SIGTERM is recorded (e.g. to deregister).
	OnSigterm func()

	// Faults the end-to-end failure scenarios inject (POST /fault/hang, POST /fault/oom).
	// CrashStateFile keeps the number of crashes still to come across container restarts
	// (a file on an emptyDir volume); "" disables /fault/oom. OOMAfterRequests: a process
	// started with crashes still to come crashes again after serving this many work
	// requests (an OOM under load). OOM runs the crash; nil: allocate memory until the
	// container's memory limit kills the process.
	CrashStateFile   string
	OOMAfterRequests int64
	OOM              func()

	Log *log.Logger // nil: discard
}

// Stats is the JSON document /stats serves.
type Stats struct {
	WarmupHits int64 `json:"warmup_hits"`
	// Requests counts work requests ("/"); probes, /warmup and /stats are not counted.
	Requests  int64     `json:"requests"`
	StartedAt time.Time `json:"started_at"`
	// SigtermAt is when SIGTERM arrived (RFC 3339 with nanoseconds), null before.
	SigtermAt *time.Time `json:"sigterm_at"`
	// AfterSigtermRequests counts work requests that arrived after SIGTERM.
	AfterSigtermRequests int64 `json:"after_sigterm_requests"`
}

// Work is the JSON document "/" serves.
type Work struct {
	Pod      string    `json:"pod"`
	Hostname string    `json:"hostname"`
	ServedAt time.Time `json:"served_at"`
}

// App is the demo service: its HTTP handlers and the counters that /stats reports.
type App struct {
	cfg Config
	now func() time.Time // time.Now; tests replace it

	mu        sync.Mutex
	startedAt time.Time
	sigtermAt time.Time // zero until SIGTERM
	stats     Stats
	terminate chan struct{} // closed by Sigterm

	hangUntil  time.Time // requests arriving before this wait until it (a hung process)
	oomArmed   bool      // crash after OOMAfterRequests more work requests
	oomCounter int64
	oomStarted bool
}

// New returns an App whose start time is now.
func New(cfg Config) *App {
	if cfg.Log == nil {
		cfg.Log = log.New(io.Discard, "", 0)
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.OOM == nil {
		cfg.OOM = allocateUntilKilled(cfg.Log)
	}
	if cfg.OOMAfterRequests <= 0 {
		cfg.OOMAfterRequests = 50
	}
	a := &App{cfg: cfg, now: time.Now, terminate: make(chan struct{})}
	a.startedAt = a.now()
	if cfg.CrashStateFile != "" {
		if n := readCrashes(cfg.CrashStateFile); n > 0 {
			// A restart inside a crash loop: one crash fewer to come, and this run crashes too.
			if err := writeCrashes(cfg.CrashStateFile, n-1); err != nil {
				cfg.Log.Printf("crash loop: cannot record the remaining crashes in %s: %v", cfg.CrashStateFile, err)
			}
			a.oomArmed = true
			cfg.Log.Printf("crash loop: this run crashes after %d work requests (%d more to come)", cfg.OOMAfterRequests, n-1)
		}
	}
	return a
}

// Handler serves /, /warmup, /ready, /healthz and /stats. Every response has the headers
// X-Pod and X-After-Sigterm (whether the request arrived after SIGTERM).
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", a.work)
	mux.HandleFunc("/warmup", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		a.stats.WarmupHits++
		a.mu.Unlock()
		fmt.Fprintln(w, "warm")
	})
	mux.HandleFunc("/ready", a.ready)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.Stats()) })
	mux.HandleFunc("POST /fault/hang", a.faultHang)
	mux.HandleFunc("POST /fault/oom", a.faultOOM)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/fault/") {
			a.waitHang(r.Context())
		}
		after := a.arrive(r.URL.Path == "/")
		w.Header().Set("X-Pod", a.cfg.Pod)
		w.Header().Set("X-After-Sigterm", strconv.FormatBool(after))
		mux.ServeHTTP(w, r)
	})
}

// arrive counts a request as it arrives and says whether SIGTERM came before it.
func (a *App) arrive(work bool) (afterSigterm bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	afterSigterm = !a.sigtermAt.IsZero()
	if work {
		a.stats.Requests++
		if afterSigterm {
			a.stats.AfterSigtermRequests++
		}
		if a.oomArmed && !a.oomStarted {
			a.oomCounter++
			if a.oomCounter >= a.cfg.OOMAfterRequests {
				a.oomStarted = true
				go a.cfg.OOM()
			}
		}
	}
	return afterSigterm
}

// faultHang makes the process hang for ?for= (default 15s): every request that arrives
// meanwhile (probes included) waits until the hang ends, as in a deadlock or an exhausted
// worker pool. Goroutines outside the HTTP server (the self-registration heartbeat) go on.
func (a *App) faultHang(w http.ResponseWriter, r *http.Request) {
	d := 15 * time.Second
	if v := r.URL.Query().Get("for"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			http.Error(w, "for: a positive duration", http.StatusBadRequest)
			return
		}
	}
	a.mu.Lock()
	a.hangUntil = a.now().Add(d)
	a.mu.Unlock()
	a.cfg.Log.Printf("fault: hanging for %s", d)
	fmt.Fprintf(w, "hanging for %s\n", d)
}

func (a *App) waitHang(ctx context.Context) {
	a.mu.Lock()
	until := a.hangUntil
	a.mu.Unlock()
	d := until.Sub(a.now())
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// faultOOM starts an OOM-style crash loop: the process crashes now (OOM) and, after each of
// the next ?restarts= (default 2) restarts, again once it has served OOMAfterRequests work
// requests. It needs CrashStateFile.
func (a *App) faultOOM(w http.ResponseWriter, r *http.Request) {
	if a.cfg.CrashStateFile == "" {
		http.Error(w, "no --crash-state-file", http.StatusBadRequest)
		return
	}
	n := 2
	if v := r.URL.Query().Get("restarts"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			http.Error(w, "restarts: a non-negative integer", http.StatusBadRequest)
			return
		}
	}
	if err := writeCrashes(a.cfg.CrashStateFile, n); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	a.mu.Lock()
	start := !a.oomStarted
	a.oomStarted = true
	a.mu.Unlock()
	a.cfg.Log.Printf("fault: OOM now, then %d more crashes after restarts", n)
	fmt.Fprintf(w, "crashing; %d more after restarts\n", n)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if start {
		go a.cfg.OOM()
	}
}

func readCrashes(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}

func writeCrashes(path string, n int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(n)), 0o644)
}

// allocateUntilKilled returns an OOM: it allocates and touches memory in 16 MiB steps until
// the kernel's OOM killer ends the process at the container's memory limit. Without a limit
// it stops at 1 GiB and exits with 137 (what an OOM kill reports), saying so in the log.
func allocateUntilKilled(logger *log.Logger) func() {
	return func() {
		hold := make([][]byte, 0, 64)
		for range 64 {
			b := make([]byte, 16<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			hold = append(hold, b)
		}
		logger.Printf("fault: allocated %d MiB without an OOM kill (no memory limit?); exiting 137", len(hold)*16)
		os.Exit(137)
	}
}

func (a *App) work(w http.ResponseWriter, r *http.Request) {
	if a.cfg.WorkDelay > 0 {
		t := time.NewTimer(a.cfg.WorkDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, Work{Pod: a.cfg.Pod, Hostname: a.cfg.Hostname, ServedAt: a.now()})
}

func (a *App) ready(w http.ResponseWriter, _ *http.Request) {
	now := a.now()
	a.mu.Lock()
	terminating := !a.sigtermAt.IsZero()
	a.mu.Unlock()
	switch {
	case terminating && a.cfg.FailReadyOnSigterm:
		http.Error(w, "terminating", http.StatusServiceUnavailable)
	case now.Sub(a.startedAt) < a.cfg.ReadyAfter:
		http.Error(w, "starting", http.StatusServiceUnavailable)
	default:
		fmt.Fprintln(w, "ready")
	}
}

// Stats returns a copy of the counters.
func (a *App) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.StartedAt = a.startedAt
	if !a.sigtermAt.IsZero() {
		t := a.sigtermAt
		s.SigtermAt = &t
	}
	return s
}

// Sigterm records that SIGTERM arrived, logs "sigterm at <RFC3339Nano>", runs
// Config.OnSigterm and starts the shutdown of Serve. Later calls do nothing.
func (a *App) Sigterm() {
	a.mu.Lock()
	if !a.sigtermAt.IsZero() {
		a.mu.Unlock()
		return
	}
	a.sigtermAt = a.now()
	at := a.sigtermAt
	a.mu.Unlock()
	a.cfg.Log.Printf("sigterm at %s", at.Format(time.RFC3339Nano))
	if a.cfg.OnSigterm != nil {
		a.cfg.OnSigterm()
	}
	close(a.terminate)
}

// Serve serves the Handler on ln until Sigterm, then keeps serving for
// Config.ShutdownGrace, then stops accepting and waits (at most Config.ShutdownTimeout) for
// the requests in flight. It returns nil after a clean shutdown.
func (a *App) Serve(ln net.Listener) error {
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-a.terminate:
	}
	if a.cfg.ShutdownGrace > 0 {
		a.cfg.Log.Printf("serving for the shutdown grace of %s", a.cfg.ShutdownGrace)
		time.Sleep(a.cfg.ShutdownGrace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	s := a.Stats()
	a.cfg.Log.Printf("stopped: requests=%d after_sigterm_requests=%d warmup_hits=%d", s.Requests, s.AfterSigtermRequests, s.WarmupHits)
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
