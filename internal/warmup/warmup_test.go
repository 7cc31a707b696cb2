package warmup

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// waitLimit bounds every wait for something that must happen; it is only reached when a
// test fails.
const waitLimit = 10 * time.Second

// quietPeriod is how long a test watches for something that must NOT happen (a return, a
// request). It is used only for such "not yet" assertions, never to synchronise.
const quietPeriod = 50 * time.Millisecond

// checkGoroutines records the number of goroutines now and, when the test ends (after
// every cleanup registered later, such as closing servers and idle connections), checks
// that it is back to at most that number. Call it first in a test.
func checkGoroutines(t *testing.T) {
	t.Helper()
	baseline := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(waitLimit)
		for runtime.NumGoroutine() > baseline {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				t.Errorf("goroutines: %d at start, %d at end:\n%s", baseline, runtime.NumGoroutine(), buf[:n])
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// newClient returns a client with its own tracked transport, whose idle connections are
// closed when the test ends.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: &tracking{base: tr}}
}

// tracking counts round trips in progress plus response bodies not yet closed. Run waits
// for its workers, so the count must be zero the moment Run returns.
type tracking struct {
	base http.RoundTripper
	open atomic.Int64
	read atomic.Int64 // body bytes read
}

func (tr *tracking) RoundTrip(req *http.Request) (*http.Response, error) {
	tr.open.Add(1)
	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		tr.open.Add(-1)
		return nil, err
	}
	resp.Body = &trackedBody{ReadCloser: resp.Body, tr: tr}
	return resp, nil
}

type trackedBody struct {
	io.ReadCloser
	tr   *tracking
	once sync.Once
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.tr.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error {
	b.once.Do(func() { b.tr.open.Add(-1) })
	return b.ReadCloser.Close()
}

// openRequests reports the requests of r's client still in flight or with unclosed bodies.
func openRequests(r *Runner) int64 {
	if r.Client == nil {
		return 0
	}
	if tr, ok := r.Client.Transport.(*tracking); ok {
		return tr.open.Load()
	}
	return 0
}

// runSync calls r.Run and checks that nothing it started is still open when it returns.
func runSync(t *testing.T, r *Runner, ctx context.Context, s Spec) Result {
	t.Helper()
	res := r.Run(ctx, s)
	if n := openRequests(r); n != 0 {
		t.Errorf("%d requests in flight or with unclosed bodies when Run returned", n)
	}
	return res
}

// hits counts the requests a test server received, in total and per path.
type hits struct {
	mu     sync.Mutex
	total  int
	byPath map[string]int
}

func (h *hits) add(r *http.Request) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byPath == nil {
		h.byPath = map[string]int{}
	}
	h.total++
	h.byPath[r.URL.Path]++
	return h.total
}

func (h *hits) get() (int, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[string]int{}
	for k, v := range h.byPath {
		m[k] = v
	}
	return h.total, m
}

func (h *hits) count() int {
	n, _ := h.get()
	return n
}

// newServer starts a loopback HTTP server that counts requests and then calls handle
// with the request's 1-based sequence number.
func newServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) (*httptest.Server, *hits) {
	h := &hits{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle(w, r, h.add(r))
	}))
	t.Cleanup(srv.Close)
	return srv, h
}

func ok(w http.ResponseWriter, _ *http.Request, _ int) { _, _ = w.Write([]byte("warm")) }

// outcome is what an asynchronous Run returned, and how many of its requests were still
// open at that moment.
type outcome struct {
	res  Result
	open int64
}

// runAsync runs r.Run in a goroutine; the outcome arrives on the returned channel.
func runAsync(ctx context.Context, r *Runner, s Spec) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res := r.Run(ctx, s)
		ch <- outcome{res, openRequests(r)}
	}()
	return ch
}

func awaitResult(t *testing.T, ch <-chan outcome) Result {
	t.Helper()
	select {
	case o := <-ch:
		if o.open != 0 {
			t.Errorf("%d requests in flight or with unclosed bodies when Run returned", o.open)
		}
		return o.res
	case <-time.After(waitLimit):
		t.Fatalf("Run did not return within %v", waitLimit)
		return Result{}
	}
}

func assertNotReturned(t *testing.T, ch <-chan outcome) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("Run returned early: %+v", o.res)
	case <-time.After(quietPeriod):
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func newFakeClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// refusedURL returns a loopback URL on which nothing listens.
func refusedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr + "/warm"
}

func TestExactRequestCountWhenAllSucceed(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		requests, concurrency int
	}{
		{"sequential", 5, 1},
		{"concurrent", 7, 3},
		{"concurrency above requests", 2, 5},
		{"many", 50, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			srv, h := newServer(t, ok)
			r := &Runner{Client: newClient(t), Clock: clock.RealClock{}}
			res := runSync(t, r, context.Background(), Spec{
				URLs: []string{srv.URL + "/warm"}, Requests: tc.requests, Concurrency: tc.concurrency,
				RequestTimeout: 5 * time.Second, Timeout: waitLimit,
			})
			if res.Err != nil {
				t.Fatalf("Err = %v", res.Err)
			}
			if res.Succeeded != tc.requests || res.Failed != 0 {
				t.Errorf("Succeeded, Failed = %d, %d; want %d, 0", res.Succeeded, res.Failed, tc.requests)
			}
			if got := h.count(); got != tc.requests {
				t.Errorf("server received %d requests, want exactly %d", got, tc.requests)
			}
		})
	}
}

func TestRoundRobin(t *testing.T) {
	checkGoroutines(t)
	srv, h := newServer(t, ok)
	r := &Runner{Client: newClient(t), Clock: clock.RealClock{}}
	res := runSync(t, r, context.Background(), Spec{
		URLs:     []string{srv.URL + "/a", srv.URL + "/b", srv.URL + "/c"},
		Requests: 9, Concurrency: 2, Timeout: waitLimit,
	})
	if res.Err != nil {
		t.Fatalf("Err = %v", res.Err)
	}
	total, byPath := h.get()
	if total != 9 {
		t.Errorf("server received %d requests, want 9", total)
	}
	for _, p := range []string{"/a", "/b", "/c"} {
		if byPath[p] != 3 {
			t.Errorf("path %s received %d requests, want 3 (all: %v)", p, byPath[p], byPath)
		}
	}
}

func TestConcurrencyBound(t *testing.T) {
	const requests, concurrency = 12, 3
	checkGoroutines(t)
	var cur, peak atomic.Int32
	arrived := make(chan struct{}, requests)
	release := make(chan struct{})
	srv, h := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		cur.Add(-1) // before the response is written, so the client cannot be faster
		ok(w, r, 0)
	})
	r := &Runner{Client: newClient(t), Clock: clock.RealClock{}}
	ch := runAsync(context.Background(), r, Spec{
		URLs: []string{srv.URL + "/warm"}, Requests: requests, Concurrency: concurrency, Timeout: waitLimit,
	})

	awaitArrival := func() {
		t.Helper()
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			t.Fatalf("request did not arrive (server saw %d)", h.count())
		}
	}
	for range concurrency {
		awaitArrival()
	}
	// All slots are busy: no further request may arrive until one is released.
	select {
	case <-arrived:
		t.Fatalf("request %d arrived while %d were in flight", concurrency+1, concurrency)
	case <-time.After(quietPeriod):
	}
	// Release one at a time: each release lets exactly one new request in.
	for range requests - concurrency {
		release <- struct{}{}
		awaitArrival()
	}
	for range concurrency {
		release <- struct{}{}
	}
	res := awaitResult(t, ch)
	if res.Err != nil || res.Succeeded != requests {
		t.Fatalf("Result = %+v, want %d successes", res, requests)
	}
	if got := peak.Load(); got != concurrency {
		t.Errorf("max in flight = %d, want %d", got, concurrency)
	}
	if got := h.count(); got != requests {
		t.Errorf("server received %d requests, want %d", got, requests)
	}
}

func TestServerErrorsAreRetried(t *testing.T) {
	checkGoroutines(t)
	statuses := []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusNotFound, http.StatusOK}
	srv, h := newServer(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n <= len(statuses) {
			w.WriteHeader(statuses[n-1])
		}
	})
	r := &Runner{Client: newClient(t), Clock: clock.RealClock{}, RetryPause: time.Millisecond}
	res := runSync(t, r, context.Background(), Spec{
		URLs: []string{srv.URL + "/warm"}, Requests: 2, Concurrency: 1, Timeout: waitLimit,
	})
	if res.Err != nil {
		t.Fatalf("Err = %v", res.Err)
	}
	// 500 and 503 fail; 404 (< 500) and 200 succeed.
	if res.Succeeded != 2 || res.Failed != 2 {
		t.Errorf("Succeeded, Failed = %d, %d; want 2, 2", res.Succeeded, res.Failed)
	}
	if got := h.count(); got != 4 {
		t.Errorf("server received %d requests, want 4", got)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		checkGoroutines(t)
		srv, h := newServer(t, ok)
		r := &Runner{Client: newClient(t), Clock: clock.RealClock{}, RetryPause: time.Millisecond}
		// Round-robin with one slot: refused, ok, refused, ok.
		res := runSync(t, r, context.Background(), Spec{
			URLs:     []string{refusedURL(t), srv.URL + "/warm"},
			Requests: 2, Concurrency: 1, Timeout: waitLimit,
		})
		if res.Err != nil {
			t.Fatalf("Err = %v", res.Err)
		}
		if res.Succeeded != 2 || res.Failed != 2 {
			t.Errorf("Succeeded, Failed = %d, %d; want 2, 2", res.Succeeded, res.Failed)
		}
		if got := h.count(); got != 2 {
			t.Errorf("server received %d requests, want 2", got)
		}
	})
	t.Run("until timeout", func(t *testing.T) {
		checkGoroutines(t)
		r := &Runner{Client: newClient(t), Clock: clock.RealClock{}, RetryPause: 5 * time.Millisecond}
		res := runSync(t, r, context.Background(), Spec{
			URLs: []string{refusedURL(t)}, Requests: 1, Concurrency: 2, Timeout: 100 * time.Millisecond,
		})
		if !errors.Is(res.Err, ErrTimeout) {
			t.Fatalf("Err = %v, want ErrTimeout", res.Err)
		}
		if res.Succeeded != 0 || res.Failed < 2 {
			t.Errorf("Succeeded, Failed = %d, %d; want 0, >= 2", res.Succeeded, res.Failed)
		}
		if !strings.Contains(res.Err.Error(), "refused") {
			t.Errorf("Err %q does not carry the last failure", res.Err)
		}
	})
}

func TestBodyDrainIsBounded(t *testing.T) {
	checkGoroutines(t)
	chunk := make([]byte, 64<<10)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		for range 128 { // 8 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	client := newClient(t)
	r := &Runner{Client: client, Clock: clock.RealClock{}}
	res := runSync(t, r, context.Background(), Spec{
		URLs: []string{srv.URL + "/big"}, Requests: 1, Concurrency: 1, Timeout: waitLimit,
	})
	if res.Err != nil || res.Succeeded != 1 {
		t.Fatalf("Result = %+v, want 1 success", res)
	}
	if got := client.Transport.(*tracking).read.Load(); got != 1<<20 {
		t.Errorf("read %d body bytes, want exactly 1 MiB", got)
	}
}

func TestRequestTimeoutIsAFailure(t *testing.T) {
	checkGoroutines(t)
	stop := make(chan struct{})
	srv, h := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 { // hang until the client gives up
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		ok(w, r, n)
	})
	t.Cleanup(func() { close(stop) })
	r := &Runner{Client: newClient(t), Clock: clock.RealClock{}, RetryPause: time.Millisecond}
	res := runSync(t, r, context.Background(), Spec{
		URLs: []string{srv.URL + "/warm"}, Requests: 1, Concurrency: 1,
		RequestTimeout: 50 * time.Millisecond, Timeout: waitLimit,
	})
	if res.Err != nil {
		t.Fatalf("Err = %v", res.Err)
	}
	if res.Succeeded != 1 || res.Failed != 1 {
		t.Errorf("Succeeded, Failed = %d, %d; want 1, 1", res.Succeeded, res.Failed)
	}
	if got := h.count(); got != 2 {
		t.Errorf("server received %d requests, want 2", got)
	}
}

func TestRetryPauseUsesClock(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryPause time.Duration
		wantPause  time.Duration
	}{
		{"explicit", time.Second, time.Second},
		{"default", 0, DefaultRetryPause},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			srv, h := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				ok(w, r, n)
			})
			fc := newFakeClock()
			r := &Runner{Client: newClient(t), Clock: fc, RetryPause: tc.retryPause}
			ch := runAsync(context.Background(), r, Spec{URLs: []string{srv.URL + "/warm"}, Requests: 1, Concurrency: 1})

			waitFor(t, "the retry pause", fc.HasWaiters)
			fc.Step(tc.wantPause - time.Millisecond)
			assertNotReturned(t, ch)
			if got := h.count(); got != 1 {
				t.Fatalf("server received %d requests before the pause ended, want 1", got)
			}
			fc.Step(time.Millisecond)
			res := awaitResult(t, ch)
			if res.Err != nil || res.Succeeded != 1 || res.Failed != 1 {
				t.Errorf("Result = %+v, want 1 success, 1 failure", res)
			}
			if res.Elapsed != tc.wantPause {
				t.Errorf("Elapsed = %v, want %v", res.Elapsed, tc.wantPause)
			}
			if got := h.count(); got != 2 {
				t.Errorf("server received %d requests, want 2", got)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	t.Run("fake clock, failing pod", func(t *testing.T) {
		checkGoroutines(t)
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				ok(w, r, n)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		fc := newFakeClock()
		r := &Runner{Client: newClient(t), Clock: fc, RetryPause: time.Second}
		ch := runAsync(context.Background(), r, Spec{
			URLs: []string{srv.URL + "/warm"}, Requests: 3, Concurrency: 1, Timeout: 10 * time.Second,
		})
		// The Timeout timer plus the pause after the first failure.
		waitFor(t, "the timeout timer and a retry pause", func() bool { return fc.Waiters() == 2 })
		assertNotReturned(t, ch)
		fc.Step(10 * time.Second)
		res := awaitResult(t, ch)
		if !errors.Is(res.Err, ErrTimeout) {
			t.Fatalf("Err = %v, want ErrTimeout", res.Err)
		}
		if res.Succeeded != 1 || res.Failed < 1 {
			t.Errorf("Succeeded, Failed = %d, %d; want 1, >= 1", res.Succeeded, res.Failed)
		}
		if !strings.Contains(res.Err.Error(), "503") {
			t.Errorf("Err %q does not carry the last failure", res.Err)
		}
		if res.Elapsed != 10*time.Second {
			t.Errorf("Elapsed = %v, want 10s", res.Elapsed)
		}
	})
	t.Run("real clock, hanging pod", func(t *testing.T) {
		checkGoroutines(t)
		stop := make(chan struct{})
		srv, h := newServer(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		})
		t.Cleanup(func() { close(stop) })
		r := &Runner{Client: newClient(t), Clock: clock.RealClock{}}
		begin := time.Now()
		res := runSync(t, r, context.Background(), Spec{
			URLs: []string{srv.URL + "/warm"}, Requests: 4, Concurrency: 2, Timeout: 100 * time.Millisecond,
		})
		took := time.Since(begin)
		if !errors.Is(res.Err, ErrTimeout) {
			t.Fatalf("Err = %v, want ErrTimeout", res.Err)
		}
		if errors.Is(res.Err, context.DeadlineExceeded) || errors.Is(res.Err, context.Canceled) {
			t.Errorf("Err %v must not look like a context error", res.Err)
		}
		if res.Succeeded != 0 || res.Failed != 0 {
			t.Errorf("Succeeded, Failed = %d, %d; want 0, 0 (abandoned requests count in neither)", res.Succeeded, res.Failed)
		}
		if res.Elapsed < 100*time.Millisecond || took > 2*time.Second {
			t.Errorf("Elapsed = %v, Run took %v; want about 100ms", res.Elapsed, took)
		}
		if got := h.count(); got > 2 {
			t.Errorf("server received %d requests, want at most 2 (Concurrency)", got)
		}
	})
}

func TestMinDuration(t *testing.T) {
	t.Run("waits on the clock", func(t *testing.T) {
		checkGoroutines(t)
		srv, h := newServer(t, ok)
		fc := newFakeClock()
		r := &Runner{Client: newClient(t), Clock: fc}
		ch := runAsync(context.Background(), r, Spec{
			URLs: []string{srv.URL + "/warm"}, Requests: 3, Concurrency: 2, MinDuration: 30 * time.Second,
		})
		waitFor(t, "the minimum-duration wait", fc.HasWaiters)
		if got := h.count(); got != 3 {
			t.Errorf("server received %d requests, want 3", got)
		}
		assertNotReturned(t, ch)
		fc.Step(30*time.Second - time.Nanosecond)
		assertNotReturned(t, ch)
		fc.Step(time.Nanosecond)
		res := awaitResult(t, ch)
		if res.Err != nil || res.Succeeded != 3 {
			t.Fatalf("Result = %+v, want 3 successes", res)
		}
		if res.Elapsed != 30*time.Second {
			t.Errorf("Elapsed = %v, want 30s", res.Elapsed)
		}
	})

	// A slow pod: each request advances the fake clock by 40s.
	for _, tc := range []struct {
		name        string
		minDuration time.Duration
		wantElapsed time.Duration
	}{
		{"floor already passed", 30 * time.Second, 80 * time.Second},
		{"floor partly passed", 100 * time.Second, 100 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			fc := newFakeClock()
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				fc.Step(40 * time.Second)
				ok(w, r, n)
			})
			r := &Runner{Client: newClient(t), Clock: fc}
			ch := runAsync(context.Background(), r, Spec{
				URLs: []string{srv.URL + "/warm"}, Requests: 2, Concurrency: 1, MinDuration: tc.minDuration,
			})
			if rest := tc.wantElapsed - 80*time.Second; rest > 0 {
				waitFor(t, "the minimum-duration wait", fc.HasWaiters)
				fc.Step(rest - time.Nanosecond)
				assertNotReturned(t, ch)
				fc.Step(time.Nanosecond)
			}
			res := awaitResult(t, ch)
			if res.Err != nil || res.Succeeded != 2 {
				t.Fatalf("Result = %+v, want 2 successes", res)
			}
			if res.Elapsed != tc.wantElapsed {
				t.Errorf("Elapsed = %v, want %v (MinDuration is a floor, not added on top)", res.Elapsed, tc.wantElapsed)
			}
			if fc.HasWaiters() {
				t.Errorf("timers left on the clock after Run returned")
			}
		})
	}
}

func TestCancel(t *testing.T) {
	t.Run("requests in flight", func(t *testing.T) {
		checkGoroutines(t)
		arrived := make(chan struct{}, 10)
		stop := make(chan struct{})
		srv, h := newServer(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		})
		t.Cleanup(func() { close(stop) })
		r := &Runner{Client: newClient(t), Clock: clock.RealClock{}, RetryPause: time.Millisecond}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := runAsync(ctx, r, Spec{URLs: []string{srv.URL + "/warm"}, Requests: 5, Concurrency: 2, Timeout: waitLimit})
		for range 2 {
			select {
			case <-arrived:
			case <-time.After(waitLimit):
				t.Fatal("requests did not arrive")
			}
		}
		begin := time.Now()
		cancel()
		res := awaitResult(t, ch)
		took := time.Since(begin)
		t.Logf("Run returned %v after cancel", took)
		if took > 500*time.Millisecond {
			t.Errorf("Run took %v to return after cancel", took)
		}
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", res.Err)
		}
		if errors.Is(res.Err, ErrTimeout) {
			t.Errorf("Err %v must not be ErrTimeout", res.Err)
		}
		if res.Succeeded != 0 || res.Failed != 0 {
			t.Errorf("Succeeded, Failed = %d, %d; want 0, 0", res.Succeeded, res.Failed)
		}
		if got := h.count(); got != 2 {
			t.Errorf("server received %d requests by the time Run returned, want 2", got)
		}
		// Not-yet check: nothing of Run's may send anything after it returned.
		time.Sleep(quietPeriod)
		if got := h.count(); got != 2 {
			t.Errorf("server received %d requests after Run returned, want 2", got)
		}
	})
	t.Run("retry pause", func(t *testing.T) {
		checkGoroutines(t)
		srv, h := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.WriteHeader(http.StatusBadGateway)
		})
		fc := newFakeClock()
		r := &Runner{Client: newClient(t), Clock: fc, RetryPause: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := runAsync(ctx, r, Spec{URLs: []string{srv.URL + "/warm"}, Requests: 1, Concurrency: 1})
		waitFor(t, "the retry pause", fc.HasWaiters)
		cancel()
		res := awaitResult(t, ch)
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", res.Err)
		}
		if res.Failed != 1 || h.count() != 1 {
			t.Errorf("Failed = %d, server received %d; want 1, 1", res.Failed, h.count())
		}
		if fc.HasWaiters() {
			t.Errorf("timers left on the clock after Run returned")
		}
	})
	t.Run("minimum duration", func(t *testing.T) {
		checkGoroutines(t)
		srv, _ := newServer(t, ok)
		fc := newFakeClock()
		r := &Runner{Client: newClient(t), Clock: fc}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := runAsync(ctx, r, Spec{URLs: []string{srv.URL + "/warm"}, Requests: 2, Concurrency: 2, MinDuration: time.Hour})
		waitFor(t, "the minimum-duration wait", fc.HasWaiters)
		cancel()
		res := awaitResult(t, ch)
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", res.Err)
		}
		if res.Succeeded != 2 {
			t.Errorf("Succeeded = %d, want 2", res.Succeeded)
		}
		if fc.HasWaiters() {
			t.Errorf("timers left on the clock after Run returned")
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		checkGoroutines(t)
		srv, h := newServer(t, ok)
		r := &Runner{Client: newClient(t), Clock: clock.RealClock{}}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res := runSync(t, r, ctx, Spec{URLs: []string{srv.URL + "/warm"}, Requests: 2, Concurrency: 2})
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", res.Err)
		}
		if got := h.count(); got != 0 {
			t.Errorf("server received %d requests, want 0", got)
		}
	})
	t.Run("caller deadline", func(t *testing.T) {
		checkGoroutines(t)
		stop := make(chan struct{})
		srv, _ := newServer(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		})
		t.Cleanup(func() { close(stop) })
		r := &Runner{Client: newClient(t), Clock: clock.RealClock{}}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res := runSync(t, r, ctx, Spec{URLs: []string{srv.URL + "/warm"}, Requests: 1, Concurrency: 1, Timeout: waitLimit})
		if !errors.Is(res.Err, context.DeadlineExceeded) || errors.Is(res.Err, ErrTimeout) {
			t.Fatalf("Err = %v, want context.DeadlineExceeded and not ErrTimeout", res.Err)
		}
	})
}

func TestInvalid(t *testing.T) {
	checkGoroutines(t)
	srv, h := newServer(t, ok)
	client := newClient(t)
	valid := Spec{URLs: []string{srv.URL + "/warm"}, Requests: 1, Concurrency: 1}
	for _, tc := range []struct {
		name   string
		runner Runner
		mutate func(*Spec)
		want   string
	}{
		{"zero requests", Runner{}, func(s *Spec) { s.Requests = 0 }, "Requests"},
		{"negative requests", Runner{}, func(s *Spec) { s.Requests = -1 }, "Requests"},
		{"zero concurrency", Runner{}, func(s *Spec) { s.Concurrency = 0 }, "Concurrency"},
		{"no URLs", Runner{}, func(s *Spec) { s.URLs = nil }, "URLs"},
		{"relative URL", Runner{}, func(s *Spec) { s.URLs = []string{"/warm"} }, "URLs[0]"},
		{"bad scheme", Runner{}, func(s *Spec) { s.URLs = append(s.URLs, "ftp://10.0.0.1/warm") }, "URLs[1]"},
		{"negative timeout", Runner{}, func(s *Spec) { s.Timeout = -time.Second }, "Timeout"},
		{"negative request timeout", Runner{}, func(s *Spec) { s.RequestTimeout = -time.Second }, "RequestTimeout"},
		{"negative min duration", Runner{}, func(s *Spec) { s.MinDuration = -time.Second }, "MinDuration"},
		{"no client", Runner{Clock: clock.RealClock{}}, func(*Spec) {}, "Client"},
		{"no clock", Runner{Client: client}, func(*Spec) {}, "Clock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.runner
			if r.Client == nil && r.Clock == nil {
				r = Runner{Client: client, Clock: clock.RealClock{}}
			}
			s := valid
			s.URLs = append([]string(nil), valid.URLs...)
			tc.mutate(&s)
			res := runSync(t, &r, context.Background(), s)
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Errorf("Err = %v, want an error about %s", res.Err, tc.want)
			}
			if errors.Is(res.Err, ErrTimeout) {
				t.Errorf("Err %v must not be ErrTimeout", res.Err)
			}
			if res.Succeeded != 0 || res.Failed != 0 {
				t.Errorf("Succeeded, Failed = %d, %d; want 0, 0", res.Succeeded, res.Failed)
			}
		})
	}
	if got := h.count(); got != 0 {
		t.Errorf("server received %d requests, want 0", got)
	}
}
