// Package warmup sends synthetic HTTP warm-up requests to a freshly started pod before
// registrar registers it in the service registry ("warm-up before ready" in DESIGN.md).
//
// A new instance of a JIT-compiled or cache-heavy service answers its first requests
// slowly. registrar therefore keeps a pod's readiness gate False until a Runner has
// obtained a configured number of successful responses from it, with bounded
// concurrency, and optionally until a minimum warm-up duration has passed.
//
// All waiting that registrar controls (the pause between retries, the minimum duration
// and the overall Timeout) is measured with the Runner's clock, so tests can drive a
// warm-up with k8s.io/utils/clock/testing.FakeClock. Only the bound of each single request
// (Spec.RequestTimeout) is real time, because it is enforced by net/http through a
// context deadline.
package warmup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// DefaultRetryPause is the pause before re-sending after a failed request when
// Runner.RetryPause is not positive.
const DefaultRetryPause = 100 * time.Millisecond

// maxDrain bounds how much of a response body is read (and discarded) so the connection
// can be reused; the rest is dropped when the body is closed.
const maxDrain = 1 << 20

// userAgent identifies warm-up traffic in the pod's access logs.
const userAgent = "registrar-warmup"

// ErrTimeout is wrapped by Result.Err when Spec.Timeout expired before Spec.Requests
// successful responses were received. The error's message also carries the last failure.
var ErrTimeout = errors.New("warm-up did not succeed in time")

// Spec is one pod's warm-up.
type Spec struct {
	// URLs are full URLs (http://<podIP>:<port><path>), requested round-robin in the
	// order requests are sent (retries included). At least one is required; each must be
	// an absolute http or https URL.
	URLs []string
	// Requests is the number of successful responses needed (>= 1).
	Requests int
	// Concurrency is the number of requests in flight at once (>= 1). Fewer are in flight
	// when fewer successes are still needed.
	Concurrency int
	// RequestTimeout bounds each request, including reading (up to 1 MiB of) its body.
	// It is real time, enforced through the request's context. 0 means no bound besides
	// Timeout, the caller's context and the http.Client's own Timeout.
	RequestTimeout time.Duration
	// Timeout bounds the phase of obtaining Requests successes, measured with the
	// Runner's clock (0 = no bound besides the caller's context). It does not cut the
	// MinDuration wait short: once enough responses succeeded, the warm-up has succeeded.
	Timeout time.Duration
	// MinDuration is how long the warm-up lasts at least when it succeeds, measured with
	// the Runner's clock from the start of Run. It is a floor, not added on top: a
	// warm-up that already took longer returns as soon as it succeeds.
	MinDuration time.Duration
}

// Result is what happened.
type Result struct {
	// Succeeded counts responses with status < 500. It never exceeds Spec.Requests.
	Succeeded int
	// Failed counts errors, per-request timeouts and 5xx responses. Requests cut short
	// because the warm-up ended (Timeout or the caller's context) count in neither field.
	Failed int
	// Elapsed is the time from start to return, measured with the Runner's clock.
	Elapsed time.Duration
	// Err is nil on success. Otherwise it wraps ErrTimeout (its message includes the last
	// failure), the caller's ctx.Err() (test with errors.Is), or describes an invalid
	// Spec or Runner (in which case no request was sent).
	Err error
}

// Runner runs warm-ups. Its zero value is not usable: set Client and Clock. A Runner may
// be used by several goroutines at once; it is not modified by Run.
type Runner struct {
	// Client sends the requests; it is shared between warm-ups. The per-request timeout
	// comes from Spec.RequestTimeout via the request's context. Redirects are followed
	// according to the Client's policy.
	Client *http.Client
	// Clock measures Elapsed, Timeout, MinDuration and RetryPause; use clock.RealClock{}
	// in production.
	Clock clock.WithTicker
	// RetryPause is the wait before re-sending after a failed request (DefaultRetryPause,
	// 100ms, when not positive), so a pod that refuses connections is not hammered in a
	// tight loop. Each in-flight slot pauses on its own.
	RetryPause time.Duration
}

// Run warms up one pod as described by s and reports what happened. It blocks until
// s.Requests responses succeeded and s.MinDuration passed, s.Timeout expired, or ctx is
// done; in every case all of its goroutines have exited when it returns.
//
// Run never sends a request while the successes plus the requests in flight already reach
// s.Requests, so when every request succeeds the pod receives exactly s.Requests requests.
// A failed request is re-sent, to the next URL in rotation, after the Runner's RetryPause.
func (r *Runner) Run(ctx context.Context, s Spec) Result {
	if err := r.validate(s); err != nil {
		return Result{Err: err}
	}
	start := r.Clock.Now()
	res := Result{}
	finish := func(err error) Result {
		res.Err = err
		res.Elapsed = r.Clock.Since(start)
		return res
	}
	if err := ctx.Err(); err != nil {
		return finish(fmt.Errorf("warm-up interrupted: %w", err))
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &run{
		r:     r,
		s:     s,
		ctx:   runCtx,
		pause: r.RetryPause,
	}
	w.remaining.Store(int64(s.Requests))
	if w.pause <= 0 {
		w.pause = DefaultRetryPause
	}

	var timeoutC <-chan time.Time
	var timer clock.Timer
	if s.Timeout > 0 {
		timer = r.Clock.NewTimer(s.Timeout)
		timeoutC = timer.C()
	}

	var wg sync.WaitGroup
	for range min(s.Concurrency, s.Requests) {
		wg.Go(w.work)
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()

	select {
	case <-done:
	case <-ctx.Done():
	case <-timeoutC:
	}
	cancel() // abort in-flight requests and pauses, if any
	<-done   // every worker (and the waiter above) has exited
	if timer != nil {
		timer.Stop()
	}

	res.Succeeded = int(w.succeeded.Load())
	res.Failed = int(w.failed.Load())
	if err := ctx.Err(); err != nil {
		return finish(fmt.Errorf("warm-up interrupted after %d of %d successful responses: %w",
			res.Succeeded, s.Requests, err))
	}
	if res.Succeeded < s.Requests {
		// The workers stop early only when runCtx is cancelled, and ctx is not done:
		// the Timeout expired.
		return finish(w.timeoutError(res))
	}

	if rest := s.MinDuration - r.Clock.Since(start); rest > 0 {
		t := r.Clock.NewTimer(rest)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return finish(fmt.Errorf("warm-up interrupted while waiting for its minimum duration: %w",
				ctx.Err()))
		}
	}
	return finish(nil)
}

// validate reports why s (or r) cannot be run, or nil.
func (r *Runner) validate(s Spec) error {
	switch {
	case r.Client == nil:
		return errors.New("warmup: Runner.Client is nil")
	case r.Clock == nil:
		return errors.New("warmup: Runner.Clock is nil")
	case len(s.URLs) == 0:
		return errors.New("warmup: invalid spec: URLs is empty")
	case s.Requests < 1:
		return fmt.Errorf("warmup: invalid spec: Requests must be at least 1, got %d", s.Requests)
	case s.Concurrency < 1:
		return fmt.Errorf("warmup: invalid spec: Concurrency must be at least 1, got %d", s.Concurrency)
	case s.RequestTimeout < 0:
		return fmt.Errorf("warmup: invalid spec: RequestTimeout must not be negative, got %v", s.RequestTimeout)
	case s.Timeout < 0:
		return fmt.Errorf("warmup: invalid spec: Timeout must not be negative, got %v", s.Timeout)
	case s.MinDuration < 0:
		return fmt.Errorf("warmup: invalid spec: MinDuration must not be negative, got %v", s.MinDuration)
	}
	for i, raw := range s.URLs {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("warmup: invalid spec: URLs[%d]: %w", i, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("warmup: invalid spec: URLs[%d] %q is not an absolute http(s) URL", i, raw)
		}
	}
	return nil
}

// run is the state of one Run shared by its workers.
type run struct {
	r     *Runner
	s     Spec
	ctx   context.Context // cancelled when the warm-up ends
	pause time.Duration

	remaining atomic.Int64  // successes not yet claimed by a worker
	next      atomic.Uint64 // sequence number of the next request, for round-robin
	succeeded atomic.Int64
	failed    atomic.Int64
	aborted   atomic.Int64 // requests cut short by the end of the warm-up

	mu      sync.Mutex
	lastErr error
}

// claim reserves one of the successes still needed. A worker holding a claim sends (and
// re-sends) until it gets a success or the warm-up ends, so the successes plus the
// requests in flight never exceed Spec.Requests.
func (w *run) claim() bool {
	for {
		n := w.remaining.Load()
		if n <= 0 {
			return false
		}
		if w.remaining.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// work is one slot of Spec.Concurrency: it claims successes until none is left.
func (w *run) work() {
	for w.ctx.Err() == nil && w.claim() {
		for {
			if w.ctx.Err() != nil {
				return
			}
			err := w.send()
			if err == nil {
				w.succeeded.Add(1)
				break
			}
			if w.ctx.Err() != nil { // cut short by the end of the warm-up
				w.aborted.Add(1)
				return
			}
			w.failed.Add(1)
			w.mu.Lock()
			w.lastErr = err
			w.mu.Unlock()
			if !w.sleep() {
				return
			}
		}
	}
}

// sleep waits RetryPause on the Runner's clock; false when the warm-up ended meanwhile.
func (w *run) sleep() bool {
	t := w.r.Clock.NewTimer(w.pause)
	select {
	case <-t.C():
		return true
	case <-w.ctx.Done():
		t.Stop()
		return false
	}
}

// send sends one request to the next URL in rotation; nil means a response with status
// < 500.
func (w *run) send() error {
	u := w.s.URLs[(w.next.Add(1)-1)%uint64(len(w.s.URLs))]
	ctx := w.ctx
	if w.s.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.s.RequestTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := w.r.Client.Do(req)
	if err != nil {
		return err
	}
	// Drain (bounded) so the connection can be reused; errors here do not change the
	// verdict, which the status code has already given.
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	_ = resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return nil
}

// timeoutError builds the error of a warm-up whose Timeout expired.
func (w *run) timeoutError(res Result) error {
	w.mu.Lock()
	last := w.lastErr
	w.mu.Unlock()
	detail := "no request failed"
	if last != nil {
		detail = "last failure: " + last.Error()
	}
	if n := w.aborted.Load(); n > 0 {
		detail += fmt.Sprintf("; %d request(s) still in flight were abandoned", n)
	}
	return fmt.Errorf("%w (timeout %v): %d of %d successful responses, %d failed; %s",
		ErrTimeout, w.s.Timeout, res.Succeeded, w.s.Requests, res.Failed, detail)
}

// SpecOf turns the registry's spec.warmup into requests against the pod's IP and the port
// the warm-up names (the registry's first port when it names none), resolved in ports.
func SpecOf(reg *v1beta1.ServiceRegistry, pod, podIP string, ports map[string]int32) (Spec, error) {
	w := reg.Spec.Warmup
	portName := w.Port
	if portName == "" && len(reg.Spec.Ports) > 0 {
		portName = reg.Spec.Ports[0].Name
	}
	port, ok := ports[portName]
	if !ok {
		return Spec{}, fmt.Errorf("warm-up port %q is not resolved for pod %s", portName, pod)
	}
	host := net.JoinHostPort(podIP, strconv.Itoa(int(port)))
	urls := make([]string, len(w.Paths))
	for i, path := range w.Paths {
		urls[i] = "http://" + host + path
	}
	return Spec{
		URLs: urls, Requests: int(max(w.Requests, 1)), Concurrency: int(max(w.Concurrency, 1)),
		RequestTimeout: millisOr(w.RequestTimeoutMillis, v1beta1.DefaultWarmupRequestTimeoutMillis),
		Timeout:        millisOr(w.TimeoutMillis, v1beta1.DefaultWarmupTimeoutMillis),
		MinDuration:    millisOr(ptr.Deref(w.MinDurationMillis, 0), 0),
	}, nil
}

// millisOr is ms milliseconds, or def milliseconds when ms is 0 (unset).
func millisOr(ms, def int32) time.Duration {
	if ms == 0 {
		ms = def
	}
	return time.Duration(ms) * time.Millisecond
}
