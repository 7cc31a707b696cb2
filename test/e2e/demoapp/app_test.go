package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// get fetches url and returns the status, the X-Pod and X-After-Sigterm headers and the body.
func get(t *testing.T, c *http.Client, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", url, err)
	}
	return resp.StatusCode, resp.Header, body
}

func TestHeadersAndWork(t *testing.T) {
	app := New(Config{Pod: "demo-0", Hostname: "host-0"})
	srv := httptest.NewServer(app.Handler())
	defer srv.Close()

	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/", 200}, {"/warmup", 200}, {"/ready", 200}, {"/healthz", 200}, {"/stats", 200}, {"/nope", 404},
	} {
		status, h, _ := get(t, srv.Client(), srv.URL+tc.path)
		if status != tc.status || h.Get("X-Pod") != "demo-0" || h.Get("X-After-Sigterm") != "false" {
			t.Errorf("%s: status %d X-Pod %q X-After-Sigterm %q; want %d demo-0 false",
				tc.path, status, h.Get("X-Pod"), h.Get("X-After-Sigterm"), tc.status)
		}
	}

	_, _, body := get(t, srv.Client(), srv.URL+"/")
	var w Work
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatalf("/ body %q: %v", body, err)
	}
	if w.Pod != "demo-0" || w.Hostname != "host-0" || w.ServedAt.IsZero() {
		t.Errorf("/ = %+v", w)
	}

	app.Sigterm()
	for _, path := range []string{"/", "/ready", "/stats"} {
		if _, h, _ := get(t, srv.Client(), srv.URL+path); h.Get("X-After-Sigterm") != "true" {
			t.Errorf("%s after SIGTERM: X-After-Sigterm %q, want true", path, h.Get("X-After-Sigterm"))
		}
	}
}

func TestWarmupCountingAndStats(t *testing.T) {
	app := New(Config{Pod: "demo-0"})
	srv := httptest.NewServer(app.Handler())
	defer srv.Close()
	c := srv.Client()

	_, _, raw := get(t, c, srv.URL+"/stats")
	if !bytes.Contains(raw, []byte(`"sigterm_at":null`)) {
		t.Errorf("/stats before SIGTERM = %s, want sigterm_at null", raw)
	}
	for range 3 {
		get(t, c, srv.URL+"/warmup")
	}
	for range 2 {
		get(t, c, srv.URL+"/")
	}
	// Probes are not work requests.
	get(t, c, srv.URL+"/ready")
	get(t, c, srv.URL+"/healthz")
	app.Sigterm()
	get(t, c, srv.URL+"/")
	get(t, c, srv.URL+"/ready")

	_, _, raw = get(t, c, srv.URL+"/stats")
	var got struct {
		WarmupHits           int64   `json:"warmup_hits"`
		Requests             int64   `json:"requests"`
		StartedAt            string  `json:"started_at"`
		SigtermAt            *string `json:"sigterm_at"`
		AfterSigtermRequests int64   `json:"after_sigterm_requests"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("/stats %s: %v", raw, err)
	}
	if got.WarmupHits != 3 || got.Requests != 3 || got.AfterSigtermRequests != 1 {
		t.Errorf("/stats = %s; want warmup_hits 3, requests 3, after_sigterm_requests 1", raw)
	}
	started, err := time.Parse(time.RFC3339Nano, got.StartedAt)
	if err != nil {
		t.Errorf("started_at %q: %v", got.StartedAt, err)
	}
	if got.SigtermAt == nil {
		t.Fatalf("/stats = %s, want sigterm_at set", raw)
	}
	if at, err := time.Parse(time.RFC3339Nano, *got.SigtermAt); err != nil || at.Before(started) {
		t.Errorf("sigterm_at %q (started %s): %v", *got.SigtermAt, started, err)
	}
}

func TestReadiness(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		readyAfter time.Duration
		failOnTerm bool
		elapsed    time.Duration
		sigterm    bool
		want       int
	}{
		{"no delay", 0, false, 0, false, 200},
		{"before ready-after", 5 * time.Second, false, 4 * time.Second, false, 503},
		{"at ready-after", 5 * time.Second, false, 5 * time.Second, false, 200},
		{"sigterm keeps ready by default", 0, false, time.Second, true, 200},
		{"sigterm fails ready when asked", 0, true, time.Second, true, 503},
		{"fail-ready flag alone changes nothing", 0, true, time.Second, false, 200},
		{"sigterm while still starting", 5 * time.Second, false, time.Second, true, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := New(Config{Pod: "p", ReadyAfter: tc.readyAfter, FailReadyOnSigterm: tc.failOnTerm})
			var mu sync.Mutex
			now := t0
			app.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			app.startedAt = t0
			srv := httptest.NewServer(app.Handler())
			defer srv.Close()
			mu.Lock()
			now = t0.Add(tc.elapsed)
			mu.Unlock()
			if tc.sigterm {
				app.Sigterm()
			}
			if status, _, body := get(t, srv.Client(), srv.URL+"/ready"); status != tc.want {
				t.Errorf("/ready = %d %q, want %d", status, body, tc.want)
			}
		})
	}
}

// serve runs app.Serve on a loopback port and returns its URL and Serve's result channel.
func serve(t *testing.T, app *App) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Serve(ln) }()
	return "http://" + ln.Addr().String(), done
}

// syncBuffer is a log destination that tests read while the app writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var sigtermLine = regexp.MustCompile(`sigterm at (\S+)`)

func TestShutdownGraceServesNewRequests(t *testing.T) {
	var logs syncBuffer
	const grace = 2 * time.Second
	app := New(Config{Pod: "demo-1", ShutdownGrace: grace, Log: log.New(&logs, "", 0)})
	url, done := serve(t, app)
	// A fresh connection for every request: new connections must be accepted during grace.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

	if _, h, _ := get(t, c, url+"/"); h.Get("X-After-Sigterm") != "false" {
		t.Fatalf("before SIGTERM: X-After-Sigterm %q", h.Get("X-After-Sigterm"))
	}
	start := time.Now()
	app.Sigterm()
	const after = 3
	for i := range after {
		status, h, _ := get(t, c, url+"/")
		if status != 200 || h.Get("X-After-Sigterm") != "true" || h.Get("X-Pod") != "demo-1" {
			t.Errorf("request %d in grace: %d X-After-Sigterm %q X-Pod %q", i, status, h.Get("X-After-Sigterm"), h.Get("X-Pod"))
		}
	}
	if elapsed := time.Since(start); elapsed >= grace {
		t.Fatalf("requests took %s, longer than the grace %s: test inconclusive", elapsed, grace)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(grace + 10*time.Second):
		t.Fatal("Serve did not return after the grace")
	}
	if elapsed := time.Since(start); elapsed < grace {
		t.Errorf("Serve returned %s after SIGTERM, before the grace %s", elapsed, grace)
	}
	if s := app.Stats(); s.Requests != 1+after || s.AfterSigtermRequests != after {
		t.Errorf("stats requests=%d after_sigterm=%d, want %d and %d", s.Requests, s.AfterSigtermRequests, 1+after, after)
	}
	if _, err := c.Get(url + "/"); err == nil {
		t.Error("request after shutdown succeeded")
	}
	m := sigtermLine.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no 'sigterm at' line in log:\n%s", logs.String())
	}
	if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
		t.Errorf("sigterm timestamp %q: %v", m[1], err)
	}
}

func TestNoGraceStopsAcceptingButFinishesInFlight(t *testing.T) {
	const work = 2 * time.Second
	app := New(Config{Pod: "demo-2", WorkDelay: work})
	url, done := serve(t, app)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

	type result struct {
		status int
		after  string
		err    error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := c.Get(url + "/")
		if err != nil {
			inflight <- result{err: err}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		inflight <- result{status: resp.StatusCode, after: resp.Header.Get("X-After-Sigterm")}
	}()
	deadline := time.Now().Add(8 * time.Second)
	for app.Stats().Requests == 0 { // wait until the request is being worked on
		if time.Now().After(deadline) {
			t.Fatal("request did not arrive")
		}
		time.Sleep(5 * time.Millisecond)
	}

	app.Sigterm()
	host := strings.TrimPrefix(url, "http://")
	for { // the listener closes at once, while the request is still in flight
		conn, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after SIGTERM")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case r := <-inflight:
		t.Fatalf("in-flight request finished (%+v) before the listener closed; raise the work delay", r)
	default:
	}

	r := <-inflight
	if r.err != nil || r.status != 200 || r.after != "false" {
		t.Errorf("in-flight request: %+v, want 200 with X-After-Sigterm false", r)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if s := app.Stats(); s.AfterSigtermRequests != 0 {
		t.Errorf("after_sigterm_requests = %d, want 0", s.AfterSigtermRequests)
	}
}

func TestFaultHangHoldsEveryRequestUntilItEnds(t *testing.T) {
	app := New(Config{Pod: "demo-0"})
	srv := httptest.NewServer(app.Handler())
	defer srv.Close()

	resp, err := srv.Client().Post(srv.URL+"/fault/hang?for=3s", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /fault/hang: %v %v", resp, err)
	}
	resp.Body.Close()
	short := &http.Client{Timeout: 200 * time.Millisecond}
	for _, path := range []string{"/", "/ready", "/healthz"} {
		if r, err := short.Get(srv.URL + path); err == nil {
			r.Body.Close()
			t.Errorf("%s answered %d during the hang, want a timeout", path, r.StatusCode)
		}
	}
	deadline := time.Now().Add(8 * time.Second)
	for {
		r, err := short.Get(srv.URL + "/ready")
		if err == nil && r.StatusCode == 200 {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ready still failing 5s after a 3s hang: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling a recovering server
	}
	if resp, err := srv.Client().Post(srv.URL+"/fault/hang?for=-1s", "", nil); err != nil || resp.StatusCode != 400 {
		t.Errorf("negative hang: %v %v, want 400", resp, err)
	}
}

func TestFaultOOMCrashLoopsAcrossRestarts(t *testing.T) {
	state := t.TempDir() + "/crashes"
	crashed := make(chan string, 8)
	start := func(run string) (*App, *httptest.Server) {
		app := New(Config{Pod: "demo-0", CrashStateFile: state, OOMAfterRequests: 3, OOM: func() { crashed <- run }})
		return app, httptest.NewServer(app.Handler())
	}
	_, srv := start("first")
	resp, err := srv.Client().Post(srv.URL+"/fault/oom?restarts=2", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /fault/oom: %v %v", resp, err)
	}
	resp.Body.Close()
	if got := <-crashed; got != "first" {
		t.Fatalf("crash from %q, want first", got)
	}
	srv.Close()

	for _, run := range []string{"restart 1", "restart 2"} {
		_, srv := start(run)
		for range 2 {
			get(t, srv.Client(), srv.URL+"/")
		}
		select {
		case got := <-crashed:
			t.Fatalf("%s crashed (%q) before 3 work requests", run, got)
		default:
		}
		get(t, srv.Client(), srv.URL+"/")
		select {
		case got := <-crashed:
			if got != run {
				t.Fatalf("crash from %q, want %q", got, run)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not crash after 3 work requests", run)
		}
		srv.Close()
	}

	_, srv = start("restart 3")
	defer srv.Close()
	for range 10 {
		get(t, srv.Client(), srv.URL+"/")
	}
	select {
	case got := <-crashed:
		t.Fatalf("%q crashed after the crash loop was over", got)
	case <-time.After(200 * time.Millisecond):
	}

	noState := httptest.NewServer(New(Config{Pod: "demo-1"}).Handler())
	defer noState.Close()
	if resp, err := noState.Client().Post(noState.URL+"/fault/oom", "", nil); err != nil || resp.StatusCode != 400 {
		t.Errorf("/fault/oom without a state file: %v %v, want 400", resp, err)
	}
}
