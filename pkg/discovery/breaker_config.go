package discovery

import (
	"fmt"
	"strings"
	"time"
)

// BreakerConfig configures the circuit breakers of a Client. The zero value is the default:
// per-instance breakers (one per service, one per endpoint) in this process's memory. A zero
// field takes its default; a negative duration or count, or a rate outside 0–1, is rejected by
// New with the field named.
type BreakerConfig struct {
	// Disabled turns the breakers off: Do only ejects and retries on another instance.
	Disabled bool

	// Window is the sliding window the error and slow-call rates are computed over
	// (default 10s), in Buckets buckets (default 10).
	Window  time.Duration
	Buckets int
	// MinCalls is how many calls the window must hold before a rate can trip the breaker
	// (default 10), so one failure of the first call does not open it.
	MinCalls int
	// FailureRateThreshold opens the breaker when at least this share of the calls in the
	// window failed (0–1, default 0.5).
	FailureRateThreshold float64
	// SlowCallDuration is how long a call may take before it counts as slow (default 1s);
	// SlowCallRateThreshold opens the breaker when at least this share of the calls in the
	// window were slow, failed or not (0–1, default 0.8). A slow dependency holds the
	// caller's connections and goroutines; it is worse than a dead one.
	SlowCallDuration      time.Duration
	SlowCallRateThreshold float64

	// OpenDuration is how long an open breaker rejects calls before it lets a probe through
	// (default 10s), varied by ±OpenJitter (a share, 0–1, default 0.2) so that a fleet of
	// callers that tripped together does not probe together. 0 means the default; for no
	// jitter at all (not advised) give a tiny value such as 1e-9.
	OpenDuration time.Duration
	OpenJitter   float64
	// HalfOpenPermits is how many probes may be in flight at once in Half-Open (default 1);
	// HalfOpenSuccesses is how many successful probes close the breaker (default 1). One
	// failed or slow probe opens it again.
	HalfOpenPermits, HalfOpenSuccesses int
	// SlowStart, when positive, admits calls after a Half-Open → Closed transition with a
	// probability that grows linearly from 0 to 1 over SlowStart; the rest are rejected
	// with ErrBreakerOpen. It keeps a freshly recovered dependency from taking the whole
	// load at once. Default 0 (off).
	SlowStart time.Duration

	// Coordinated, when set, shares the service's breaker with every caller of the service
	// through the store (see CoordinatedConfig). Endpoint breakers stay per-instance.
	Coordinated *CoordinatedConfig

	// OnStateChange, when set, is called after every transition of a breaker of the
	// Client, outside its locks. It must not block.
	OnStateChange func(BreakerEvent)
}

// CoordinatedConfig configures the coordinated (fleet-wide) breaker of a service. Its
// state lives under {prefix}/.registrar/breakers/{service}/ in the store; see
// docs/callers.md for the key layout.
type CoordinatedConfig struct {
	// Quorum is how many distinct callers must report their local breaker tripped within
	// ReportTTL before the shared breaker opens (required, at least 1). A quorum above 1
	// keeps one faulty caller from opening the breaker for the fleet.
	Quorum int
	// ReportTTL is the lease of each caller's failure report (default: Window, at least 2s).
	ReportTTL time.Duration
	// ProbeLease is the lease of the fleet-wide half-open permit (default 5s): a caller
	// that took the permit and vanished, hangs or runs a skewed clock loses it when the
	// store expires the lease. A probe call is cut off at half the lease.
	ProbeLease time.Duration
	// ReturnSpread spreads the fleet's return when the shared breaker closes: each caller
	// admits nothing for a uniform random delay in [0, ReturnSpread], then ramps up over
	// SlowStart, as independent breakers closing at jittered times would (default
	// OpenJitter×OpenDuration). Without it one success would send the whole fleet's load
	// at once to a dependency that just came back.
	ReturnSpread time.Duration
	// StoreTimeout bounds every store write of the breaker and is the longest the caller
	// trusts its cached view of the shared state without hearing from the store (default
	// 1s). Past it, the caller falls back to its per-instance breaker until the store
	// answers again.
	StoreTimeout time.Duration
	// CallerID names this caller in the store (default hostname-pid-client number).
	CallerID string
}

// BreakerState is the state of one breaker.
type BreakerState int32

const (
	// BreakerClosed lets every call through and counts outcomes.
	BreakerClosed BreakerState = iota
	// BreakerOpen rejects every call until its open duration passes.
	BreakerOpen
	// BreakerHalfOpen lets HalfOpenPermits probes through at a time.
	BreakerHalfOpen
)

// String is the state's name.
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "Closed"
	case BreakerOpen:
		return "Open"
	case BreakerHalfOpen:
		return "HalfOpen"
	}
	return "Unknown"
}

// BreakerEvent is one transition of a breaker.
type BreakerEvent struct {
	// Service is the Client's service; Instance is the endpoint's key, or empty for the
	// service's breaker.
	Service, Instance string
	From, To          BreakerState
	At                time.Time
	// Reason says why, e.g. "failure rate 0.60 >= 0.50 over 10 calls", "probe failed",
	// "shared breaker opened by quorum".
	Reason string
}

func (b BreakerConfig) withDefaults() (BreakerConfig, error) {
	durs := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"Window", &b.Window, 10 * time.Second},
		{"SlowCallDuration", &b.SlowCallDuration, time.Second},
		{"OpenDuration", &b.OpenDuration, 10 * time.Second},
	}
	for _, d := range durs {
		if *d.d < 0 {
			return b, fmt.Errorf("discovery: Config.Breaker.%s must be positive, got %s", d.name, *d.d)
		}
		setDefault(d.d, d.def)
	}
	if b.SlowStart < 0 {
		return b, fmt.Errorf("discovery: Config.Breaker.SlowStart must not be negative, got %s", b.SlowStart)
	}
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"Buckets", &b.Buckets, 10}, {"MinCalls", &b.MinCalls, 10},
		{"HalfOpenPermits", &b.HalfOpenPermits, 1}, {"HalfOpenSuccesses", &b.HalfOpenSuccesses, 1},
	}
	for _, i := range ints {
		if *i.v < 0 {
			return b, fmt.Errorf("discovery: Config.Breaker.%s must be at least 1, got %d", i.name, *i.v)
		}
		if *i.v == 0 {
			*i.v = i.def
		}
	}
	rates := []struct {
		name string
		v    *float64
		def  float64
	}{
		{"FailureRateThreshold", &b.FailureRateThreshold, 0.5},
		{"SlowCallRateThreshold", &b.SlowCallRateThreshold, 0.8},
		{"OpenJitter", &b.OpenJitter, 0.2},
	}
	for _, r := range rates {
		if *r.v < 0 || *r.v > 1 || *r.v != *r.v {
			return b, fmt.Errorf("discovery: Config.Breaker.%s must be within 0–1, got %v", r.name, *r.v)
		}
		if *r.v == 0 && r.name != "OpenJitter" {
			*r.v = r.def
		}
	}
	if b.OpenJitter == 0 {
		b.OpenJitter = 0.2
	}
	if b.Window/time.Duration(b.Buckets) <= 0 {
		return b, fmt.Errorf("discovery: Config.Breaker.Window %s is too short for %d buckets", b.Window, b.Buckets)
	}
	if b.Coordinated != nil {
		cc := *b.Coordinated
		if cc.Quorum < 1 {
			return b, fmt.Errorf("discovery: Config.Breaker.Coordinated.Quorum must be at least 1, got %d", cc.Quorum)
		}
		for _, d := range []struct {
			name string
			d    *time.Duration
			def  time.Duration
		}{
			{"ReportTTL", &cc.ReportTTL, max(b.Window, 2*time.Second)},
			{"ProbeLease", &cc.ProbeLease, 5 * time.Second},
			{"StoreTimeout", &cc.StoreTimeout, time.Second},
			{"ReturnSpread", &cc.ReturnSpread, time.Duration(b.OpenJitter * float64(b.OpenDuration))},
		} {
			if *d.d < 0 {
				return b, fmt.Errorf("discovery: Config.Breaker.Coordinated.%s must be positive, got %s", d.name, *d.d)
			}
			setDefault(d.d, d.def)
		}
		if strings.ContainsAny(cc.CallerID, "/") {
			return b, fmt.Errorf("discovery: Config.Breaker.Coordinated.CallerID %q must not contain a slash", cc.CallerID)
		}
		b.Coordinated = &cc
	}
	return b, nil
}
