package discovery

import (
	"strings"
	"testing"
	"time"
)

// act is one step of a breaker table: a call admitted and finished at once, a call only
// admitted (its ticket held), or the oldest held ticket finished.
type act int

const (
	call act = iota
	admit
	finish
)

type step struct {
	at    time.Duration // since t0
	act   act
	o     outcome
	d     time.Duration // the call's duration
	ok    bool          // want admitted (call, admit)
	state BreakerState  // want state after the step
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// testCfg is a small breaker: window 10s in 10 buckets, 4 calls minimum, 50 % failures or
// 50 % slow calls (slow: 1s) trip it, open 10s ±20 %, one probe.
func testCfg(mod func(*BreakerConfig)) *BreakerConfig {
	c := BreakerConfig{MinCalls: 4, FailureRateThreshold: 0.5, SlowCallRateThreshold: 0.5}
	if mod != nil {
		mod(&c)
	}
	c, err := c.withDefaults()
	if err != nil {
		panic(err)
	}
	return &c
}

func ok(at time.Duration, o outcome, st BreakerState) step {
	return step{at: at, act: call, o: o, ok: true, state: st}
}

const (
	S = outcomeSuccess
	F = outcomeFailure
	I = outcomeIgnored
)

func TestBreakerTable(t *testing.T) {
	sec := time.Second
	tests := []struct {
		name  string
		cfg   func(*BreakerConfig)
		rand  float64 // the jitter draw (0.5: no jitter)
		steps []step
	}{
		{name: "trips at the failure rate once MinCalls are in the window", rand: 0.5, steps: []step{
			ok(0, S, BreakerClosed), ok(sec, F, BreakerClosed), ok(2*sec, S, BreakerClosed),
			ok(3*sec, F, BreakerOpen), // 2 of 4 failed
			{at: 4 * sec, act: call, ok: false, state: BreakerOpen},
		}},
		{name: "failures below MinCalls do not trip", rand: 0.5, steps: []step{
			ok(0, F, BreakerClosed), ok(sec, F, BreakerClosed), ok(2*sec, F, BreakerClosed),
		}},
		{name: "failures that left the window do not count", rand: 0.5, steps: []step{
			ok(0, F, BreakerClosed), ok(sec, F, BreakerClosed),
			ok(12*sec, S, BreakerClosed), ok(13*sec, S, BreakerClosed), ok(14*sec, F, BreakerClosed), ok(15*sec, S, BreakerClosed),
		}},
		{name: "slow calls trip it although none failed", rand: 0.5, steps: []step{
			{at: 0, act: call, o: S, d: 2 * sec, ok: true, state: BreakerClosed},
			ok(sec, S, BreakerClosed),
			{at: 2 * sec, act: call, o: S, d: 1500 * time.Millisecond, ok: true, state: BreakerClosed},
			{at: 3 * sec, act: call, o: S, d: sec, ok: true, state: BreakerOpen}, // 3 of 4 slow
		}},
		{name: "open until the open duration, then one probe; success closes", rand: 0.5, steps: []step{
			ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerOpen),
			{at: 9 * sec, act: call, ok: false, state: BreakerOpen},
			{at: 10 * sec, act: admit, ok: true, state: BreakerHalfOpen},
			{at: 10 * sec, act: admit, ok: false, state: BreakerHalfOpen}, // one permit
			{at: 10 * sec, act: finish, o: S, state: BreakerClosed},
			ok(11*sec, F, BreakerClosed), // the window starts empty
		}},
		{name: "a failed probe opens it again for another period", rand: 0.5, steps: []step{
			ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerOpen),
			{at: 10 * sec, act: call, o: F, ok: true, state: BreakerOpen},
			{at: 19 * sec, act: call, ok: false, state: BreakerOpen},
			{at: 20 * sec, act: call, o: S, ok: true, state: BreakerClosed},
		}},
		{name: "a slow probe opens it again", rand: 0.5, steps: []step{
			ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerOpen),
			{at: 10 * sec, act: call, o: S, d: 3 * sec, ok: true, state: BreakerOpen},
		}},
		{name: "jitter: the lowest draw opens for 80 %", rand: 0, steps: []step{
			ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerOpen),
			{at: 7999 * time.Millisecond, act: call, ok: false, state: BreakerOpen},
			{at: 8 * sec, act: call, o: S, ok: true, state: BreakerClosed},
		}},
		{name: "jitter: the highest draw opens for 120 %", rand: 0.99999, steps: []step{
			ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerOpen),
			{at: 11999 * time.Millisecond, act: call, ok: false, state: BreakerOpen},
			{at: 12 * sec, act: call, o: S, ok: true, state: BreakerClosed},
		}},
		{name: "two successful probes needed, two permits", rand: 0.5, cfg: func(c *BreakerConfig) { c.HalfOpenPermits, c.HalfOpenSuccesses = 2, 2 },
			steps: []step{
				ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerOpen),
				{at: 10 * sec, act: admit, ok: true, state: BreakerHalfOpen},
				{at: 10 * sec, act: admit, ok: true, state: BreakerHalfOpen},
				{at: 10 * sec, act: admit, ok: false, state: BreakerHalfOpen},
				{at: 10 * sec, act: finish, o: S, state: BreakerHalfOpen},
				{at: 10 * sec, act: finish, o: S, state: BreakerClosed},
			}},
		{name: "an ignored probe gives its permit back", rand: 0.5, steps: []step{
			ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerOpen),
			{at: 10 * sec, act: call, o: I, ok: true, state: BreakerHalfOpen},
			{at: 10 * sec, act: call, o: S, ok: true, state: BreakerClosed},
		}},
		{name: "a call admitted before the trip says nothing afterwards", rand: 0.5, steps: []step{
			{at: 0, act: admit, ok: true, state: BreakerClosed},
			ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerOpen),
			{at: 10 * sec, act: admit, ok: true, state: BreakerHalfOpen},
			{at: 10 * sec, act: finish, o: F, state: BreakerHalfOpen}, // the stale ticket
			{at: 10 * sec, act: finish, o: S, state: BreakerClosed},
		}},
		{name: "cancelled calls do not count", rand: 0.5, steps: []step{
			ok(0, I, BreakerClosed), ok(0, I, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed),
			ok(0, S, BreakerClosed), ok(0, S, BreakerClosed),
		}},
		{name: "slow start after a probe closed it", rand: 0.5, cfg: func(c *BreakerConfig) { c.SlowStart = 4 * time.Second },
			steps: []step{
				ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerClosed), ok(0, F, BreakerOpen),
				{at: 10 * sec, act: call, o: S, ok: true, state: BreakerClosed},
				{at: 11 * sec, act: call, ok: false, state: BreakerClosed}, // 25 % admitted, draw 0.5
				ok(13*sec, S, BreakerClosed),                               // 75 %
				ok(14*sec, S, BreakerClosed),                               // ramp over
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []BreakerEvent
			b := newBreaker(testCfg(tt.cfg), "", func() float64 { return tt.rand }, func(ev BreakerEvent) { events = append(events, ev) })
			var held []ticket
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				switch s.act {
				case call, admit:
					tk, admitted := b.allow(now)
					if admitted != s.ok {
						t.Fatalf("step %d: admitted = %v, want %v (state %s)", i, admitted, s.ok, b.State())
					}
					if admitted && s.act == call {
						tk.done(now, s.o, s.d)
					} else if admitted {
						held = append(held, tk)
					}
				case finish:
					tk := held[0]
					held = held[1:]
					tk.done(now, s.o, s.d)
				}
				if got := b.State(); got != s.state {
					t.Fatalf("step %d: state %s, want %s; events %v", i, got, s.state, events)
				}
			}
			for i := 1; i < len(events); i++ {
				if events[i].From != events[i-1].To {
					t.Errorf("events do not chain: %v", events)
				}
			}
		})
	}
}

func TestBreakerEventReasons(t *testing.T) {
	var events []BreakerEvent
	b := newBreaker(testCfg(nil), "key-1", func() float64 { return 0.5 }, func(ev BreakerEvent) { events = append(events, ev) })
	for range 4 {
		tk, _ := b.allow(t0)
		tk.done(t0, outcomeFailure, 0)
	}
	tk, _ := b.allow(t0.Add(10 * time.Second))
	tk.done(t0.Add(10*time.Second), outcomeSuccess, 0)
	want := []string{"Closed->Open failure rate 1.00 >= 0.50 over 4 calls", "Open->HalfOpen open duration over", "HalfOpen->Closed probe succeeded"}
	if len(events) != len(want) {
		t.Fatalf("events %v", events)
	}
	for i, ev := range events {
		if got := ev.From.String() + "->" + ev.To.String() + " " + ev.Reason; got != want[i] || ev.Instance != "key-1" {
			t.Errorf("event %d = %q (%s), want %q", i, got, ev.Instance, want[i])
		}
	}
}

func TestBreakerConfigRejected(t *testing.T) {
	tests := []struct {
		cfg  BreakerConfig
		want string
	}{
		{BreakerConfig{Window: -time.Second}, "Config.Breaker.Window must be positive"},
		{BreakerConfig{OpenDuration: -1}, "Config.Breaker.OpenDuration must be positive"},
		{BreakerConfig{SlowCallDuration: -1}, "Config.Breaker.SlowCallDuration must be positive"},
		{BreakerConfig{FailureRateThreshold: 1.5}, "Config.Breaker.FailureRateThreshold must be within 0–1, got 1.5"},
		{BreakerConfig{SlowCallRateThreshold: -0.1}, "Config.Breaker.SlowCallRateThreshold must be within 0–1"},
		{BreakerConfig{OpenJitter: 2}, "Config.Breaker.OpenJitter must be within 0–1"},
		{BreakerConfig{HalfOpenPermits: -1}, "Config.Breaker.HalfOpenPermits must be at least 1"},
		{BreakerConfig{MinCalls: -3}, "Config.Breaker.MinCalls must be at least 1"},
		{BreakerConfig{Window: time.Nanosecond}, "Config.Breaker.Window 1ns is too short for 10 buckets"},
		{BreakerConfig{Coordinated: &CoordinatedConfig{}}, "Config.Breaker.Coordinated.Quorum must be at least 1, got 0"},
		{BreakerConfig{Coordinated: &CoordinatedConfig{Quorum: -2}}, "Config.Breaker.Coordinated.Quorum must be at least 1, got -2"},
		{BreakerConfig{Coordinated: &CoordinatedConfig{Quorum: 1, ProbeLease: -time.Second}}, "Config.Breaker.Coordinated.ProbeLease must be positive"},
		{BreakerConfig{Coordinated: &CoordinatedConfig{Quorum: 1, ReportTTL: -time.Second}}, "Config.Breaker.Coordinated.ReportTTL must be positive"},
		{BreakerConfig{Coordinated: &CoordinatedConfig{Quorum: 1, ReturnSpread: -1}}, "Config.Breaker.Coordinated.ReturnSpread must be positive"},
		{BreakerConfig{Coordinated: &CoordinatedConfig{Quorum: 1, CallerID: "a/b"}}, "Config.Breaker.Coordinated.CallerID \"a/b\" must not contain a slash"},
	}
	for _, tt := range tests {
		_, err := Config{Endpoints: []string{"http://127.0.0.1:1"}, Service: "s", Breaker: tt.cfg}.withDefaults()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err %v, want it to name %q", tt.cfg, err, tt.want)
		}
	}
	if _, err := (Config{Endpoints: []string{"x"}, Service: ".registrar"}).withDefaults(); err == nil {
		t.Error("a service named .registrar (the operator's own directory) was accepted")
	}
	got, err := (Config{Endpoints: []string{"x"}, Service: "s", Breaker: BreakerConfig{Coordinated: &CoordinatedConfig{Quorum: 3}}}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	b := got.Breaker
	if b.Window != 10*time.Second || b.MinCalls != 10 || b.FailureRateThreshold != 0.5 || b.SlowCallRateThreshold != 0.8 ||
		b.OpenJitter != 0.2 || b.HalfOpenPermits != 1 || b.Coordinated.ProbeLease != 5*time.Second || b.Coordinated.StoreTimeout != time.Second {
		t.Errorf("defaults: %+v %+v", b, *b.Coordinated)
	}
}

func TestWindowRing(t *testing.T) {
	var w window
	w.init(10*time.Second, 10)
	for i := range 25 { // one call per second for 25 s, every third one failed
		w.add(t0.Add(time.Duration(i)*time.Second), i%3 == 0, false)
	}
	calls, failures, _ := w.totals(t0.Add(24 * time.Second))
	if calls != 10 || failures != 4 { // seconds 15..24; failed: 15, 18, 21, 24
		t.Errorf("calls %d failures %d, want 10 and 4", calls, failures)
	}
	if calls, _, _ := w.totals(t0.Add(100 * time.Second)); calls != 0 {
		t.Errorf("an idle window still counts %d calls", calls)
	}
}

// TestReturnRamp: a shared close with a return delay admits nothing before the delay, then
// a share growing over SlowStart.
func TestReturnRamp(t *testing.T) {
	draw := 0.5
	b := newBreaker(testCfg(func(c *BreakerConfig) { c.SlowStart = 4 * time.Second }), "", func() float64 { return draw }, nil)
	b.force(BreakerOpen, t0, "shared breaker opened")
	b.forceClose(t0.Add(time.Second), "shared breaker closed", true, 2*time.Second) // returns at t0+3s
	for _, c := range []struct {
		at   time.Duration
		draw float64
		want bool
	}{
		{2 * time.Second, 0, false},         // inside the delay: nothing, whatever the draw
		{2999 * time.Millisecond, 0, false}, // still inside
		{4 * time.Second, 0.2, true},        // 25 % of the ramp: a low draw passes
		{4 * time.Second, 0.3, false},       // a higher one does not
		{6 * time.Second, 0.7, true},        // 75 %
		{7 * time.Second, 0.999, true},      // ramp over: everything
		{100 * time.Second, 0.999, true},
	} {
		draw = c.draw
		if _, ok := b.allow(t0.Add(c.at)); ok != c.want {
			t.Errorf("at %s draw %.3f: admitted %v, want %v", c.at, c.draw, ok, c.want)
		}
	}
	// A new close without a ramp (the shared breaker closed while this caller was in
	// fallback, say) ends any ramp.
	b.force(BreakerOpen, t0, "shared breaker opened")
	b.forceClose(t0, "shared breaker is closed", false, 0)
	draw = 0.999
	if _, ok := b.allow(t0); !ok {
		t.Error("a close without a ramp still ramps")
	}
}
