package discovery

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBreakerOpen is returned by Do, without calling the dependency, when the service's
// breaker (or every endpoint's) rejects the call.
var ErrBreakerOpen = errors.New("discovery: circuit breaker open")

// breaker is one Closed → Open → Half-Open state machine over a sliding window. It holds no
// goroutine and no timer: Open ends when a call asks after the open deadline. Safe for
// concurrent use; a call in Closed takes two atomic loads to be admitted and the lock once
// to record its outcome.
type breaker struct {
	cfg      *BreakerConfig
	instance string // "" for the service's breaker
	rand     func() float64
	notify   func(ev BreakerEvent) // the Client's hook, outside the lock

	state atomic.Int32  // BreakerState, read without the lock
	gen   atomic.Uint64 // bumped on every transition: outcomes of older tickets are dropped
	// rampStart and rampEnd (unix ns; 0 = no ramp) bound the return after a close: before
	// rampStart nothing is admitted, then a share growing linearly to all at rampEnd.
	rampStart, rampEnd atomic.Int64

	mu        sync.Mutex
	openUntil time.Time
	inFlight  int // probes in flight in Half-Open
	successes int // successful probes in this Half-Open
	win       window
}

// ticket is one admitted call; its outcome goes back to the breaker that issued it.
type ticket struct {
	b     *breaker
	gen   uint64
	probe bool
}

func newBreaker(cfg *BreakerConfig, instance string, rand func() float64, notify func(BreakerEvent)) *breaker {
	b := &breaker{cfg: cfg, instance: instance, rand: rand, notify: notify}
	b.win.init(cfg.Window, cfg.Buckets)
	return b
}

// State is the breaker's state (Open even when its deadline passed: it turns Half-Open on
// the next call).
func (b *breaker) State() BreakerState { return BreakerState(b.state.Load()) }

// allow admits a call or says why not. In Closed it takes no lock.
func (b *breaker) allow(now time.Time) (ticket, bool) {
	gen := b.gen.Load()
	if BreakerState(b.state.Load()) == BreakerClosed {
		if end := b.rampEnd.Load(); end != 0 && now.UnixNano() < end && !b.rampAdmits(now.UnixNano(), end) {
			return ticket{}, false
		}
		return ticket{b: b, gen: gen}, true
	}
	b.mu.Lock()
	var ev *BreakerEvent
	defer func() {
		b.mu.Unlock()
		b.emit(ev)
	}()
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		return ticket{b: b, gen: b.gen.Load()}, true
	case BreakerOpen:
		if now.Before(b.openUntil) {
			return ticket{}, false
		}
		ev = b.transition(BreakerHalfOpen, now, "open duration over")
	}
	if b.inFlight >= b.cfg.HalfOpenPermits {
		return ticket{}, false
	}
	b.inFlight++
	return ticket{b: b, gen: b.gen.Load(), probe: true}, true
}

// rampAdmits draws whether a call at now (unix ns, before end) is admitted by the ramp.
func (b *breaker) rampAdmits(now, end int64) bool {
	start := b.rampStart.Load()
	if now < start {
		return false
	}
	if end <= start {
		return true
	}
	return b.rand() < float64(now-start)/float64(end-start)
}

// setRamp starts the return ramp: nothing before now+delay, then SlowStart's linear ramp.
// b.mu is held.
func (b *breaker) setRamp(now time.Time, delay time.Duration) {
	if delay <= 0 && b.cfg.SlowStart <= 0 {
		b.rampEnd.Store(0)
		return
	}
	start := now.Add(delay)
	b.rampStart.Store(start.UnixNano())
	b.rampEnd.Store(start.Add(b.cfg.SlowStart).UnixNano())
}

// blocked reports, without admitting anything, whether a call now would be rejected.
func (b *breaker) blocked(now time.Time) bool {
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		return false
	case BreakerOpen:
		b.mu.Lock()
		defer b.mu.Unlock()
		return now.Before(b.openUntil)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight >= b.cfg.HalfOpenPermits
}

// outcome is what a call's result means to a breaker.
type outcome int

const (
	outcomeSuccess outcome = iota
	outcomeFailure
	// outcomeIgnored: the call says nothing about the dependency (the caller cancelled).
	outcomeIgnored
)

// done records the outcome of a call admitted by t, which took d. It reports whether this
// outcome tripped a Closed breaker.
func (t ticket) done(now time.Time, o outcome, d time.Duration) (tripped bool) { //nolint:unparam // kept for the breaker tests and metrics to come
	if t.b == nil {
		return false
	}
	return t.b.record(t, now, o, d)
}

func (b *breaker) record(t ticket, now time.Time, o outcome, d time.Duration) (tripped bool) {
	slow := d >= b.cfg.SlowCallDuration
	b.mu.Lock()
	var ev *BreakerEvent
	defer func() {
		b.mu.Unlock()
		b.emit(ev)
	}()
	if t.gen != b.gen.Load() {
		return false // admitted before a transition: says nothing about the current state
	}
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		if o == outcomeIgnored {
			return false
		}
		b.win.add(now, o == outcomeFailure, slow)
		if o == outcomeSuccess && !slow {
			return false
		}
		if reason := b.tripReason(now); reason != "" {
			ev = b.transition(BreakerOpen, now, reason)
			return true
		}
	case BreakerHalfOpen:
		if t.probe {
			b.inFlight--
		}
		switch {
		case o == outcomeIgnored:
		case o == outcomeFailure:
			ev = b.transition(BreakerOpen, now, "probe failed")
		case slow:
			ev = b.transition(BreakerOpen, now, fmt.Sprintf("probe slow (%s)", d.Round(time.Millisecond)))
		default:
			if b.successes++; b.successes >= b.cfg.HalfOpenSuccesses {
				ev = b.transition(BreakerClosed, now, "probe succeeded")
			}
		}
	}
	return false
}

// tripReason says why the window trips the breaker, or "" when it does not.
func (b *breaker) tripReason(now time.Time) string {
	calls, failures, slow := b.win.totals(now)
	if calls < b.cfg.MinCalls {
		return ""
	}
	if r := float64(failures) / float64(calls); r >= b.cfg.FailureRateThreshold {
		return fmt.Sprintf("failure rate %.2f >= %.2f over %d calls", r, b.cfg.FailureRateThreshold, calls)
	}
	if r := float64(slow) / float64(calls); r >= b.cfg.SlowCallRateThreshold {
		return fmt.Sprintf("slow-call rate %.2f >= %.2f over %d calls", r, b.cfg.SlowCallRateThreshold, calls)
	}
	return ""
}

// transition moves to state to; b.mu is held. It returns the event to emit after unlocking.
func (b *breaker) transition(to BreakerState, now time.Time, reason string) *BreakerEvent {
	from := BreakerState(b.state.Load())
	if from == to {
		return nil
	}
	switch to {
	case BreakerOpen:
		b.openUntil = now.Add(b.openDuration())
	case BreakerHalfOpen:
		b.inFlight, b.successes = 0, 0
	case BreakerClosed:
		b.win.reset()
		if from == BreakerHalfOpen {
			b.setRamp(now, 0)
		} else {
			b.rampEnd.Store(0)
		}
	}
	b.gen.Add(1)
	b.state.Store(int32(to))
	return &BreakerEvent{Instance: b.instance, From: from, To: to, At: now, Reason: reason}
}

// openDuration is OpenDuration ±OpenJitter, uniformly.
func (b *breaker) openDuration() time.Duration {
	j := b.cfg.OpenJitter * (2*b.rand() - 1)
	return time.Duration(float64(b.cfg.OpenDuration) * (1 + j))
}

// force sets the state from outside (the coordinated breaker mirrors the shared state
// into the local one, so a fallback to local starts from what the fleet saw).
func (b *breaker) force(to BreakerState, now time.Time, reason string) { //nolint:unparam // a forced state, Open today
	b.mu.Lock()
	ev := b.transition(to, now, reason)
	b.mu.Unlock()
	b.emit(ev)
}

// forceClose closes the breaker from outside. With ramp, calls return as after a
// successful probe (SlowStart), after a delay in which none is admitted.
func (b *breaker) forceClose(now time.Time, reason string, ramp bool, delay time.Duration) {
	b.mu.Lock()
	ev := b.transition(BreakerClosed, now, reason)
	if ev != nil && ramp {
		b.setRamp(now, delay)
	}
	b.mu.Unlock()
	b.emit(ev)
}

// observe records the outcome of a call admitted by t like record, but never transitions:
// it returns the reason the window would trip the breaker and then forgets the window. The
// coordinated breaker uses the local breaker so, as its detector, while the fleet's state
// decides the calls.
func (b *breaker) observe(t ticket, now time.Time, o outcome, d time.Duration) (reason string) {
	if o == outcomeIgnored || t.b != b {
		return ""
	}
	slow := d >= b.cfg.SlowCallDuration
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen.Load() || BreakerState(b.state.Load()) != BreakerClosed {
		return ""
	}
	b.win.add(now, o == outcomeFailure, slow)
	if o == outcomeSuccess && !slow {
		return ""
	}
	if reason = b.tripReason(now); reason != "" {
		b.win.reset()
	}
	return reason
}

func (b *breaker) emit(ev *BreakerEvent) {
	if ev != nil && b.notify != nil {
		b.notify(*ev)
	}
}

// openUntilTime is the open deadline (for stats).
func (b *breaker) openUntilTime() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openUntil
}

// window counts calls, failures and slow calls in a ring of time buckets; a bucket older
// than the window is reset when its slot is reused. The caller holds the breaker's lock.
type window struct {
	width   int64 // nanoseconds per bucket
	buckets []bucket
}

type bucket struct {
	epoch                 int64 // time / width of the bucket's start
	calls, failures, slow int
}

func (w *window) init(span time.Duration, n int) {
	w.width = int64(span) / int64(n)
	w.buckets = make([]bucket, n)
	w.reset()
}

func (w *window) reset() {
	for i := range w.buckets {
		w.buckets[i] = bucket{epoch: -1 << 62}
	}
}

func (w *window) add(now time.Time, failed, slow bool) {
	epoch := now.UnixNano() / w.width
	bk := &w.buckets[floorMod(epoch, len(w.buckets))]
	if bk.epoch != epoch {
		*bk = bucket{epoch: epoch}
	}
	bk.calls++
	if failed {
		bk.failures++
	}
	if slow {
		bk.slow++
	}
}

func (w *window) totals(now time.Time) (calls, failures, slow int) {
	epoch := now.UnixNano() / w.width
	for _, bk := range w.buckets {
		if bk.epoch > epoch-int64(len(w.buckets)) && bk.epoch <= epoch {
			calls, failures, slow = calls+bk.calls, failures+bk.failures, slow+bk.slow
		}
	}
	return calls, failures, slow
}
