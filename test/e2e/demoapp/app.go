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
	"strconv"
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
}

// New returns an App whose start time is now.
func New(cfg Config) *App {
	if cfg.Log == nil {
		cfg.Log = log.New(io.Discard, "", 0)
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	a := &App{cfg: cfg, now: time.Now, terminate: make(chan struct{})}
	a.startedAt = a.now()
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	}
	return afterSigterm
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
