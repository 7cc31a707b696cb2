package discovery

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// breakers are a Client's circuit breakers: one for the service, one per endpoint (created on
// the endpoint's first call, dropped when it leaves the list), and the coordinated view when
// the service's breaker is shared.
type breakers struct {
	cfg     BreakerConfig
	service string
	svc     *breaker
	coord   *coordinated // nil unless Coordinated

	mu        sync.Mutex
	endpoints map[string]*breaker
	// nonClosed counts endpoint breakers not Closed, so picks skip the per-endpoint checks
	// while every endpoint is healthy.
	nonClosed atomic.Int64

	transitions [3]atomic.Int64 // by target state
	rejected    atomic.Int64
	probes      atomic.Int64
}

func newBreakers(cfg BreakerConfig, service string, rand func() float64) *breakers {
	bs := &breakers{cfg: cfg, service: service, endpoints: map[string]*breaker{}}
	bs.svc = newBreaker(&bs.cfg, "", rand, bs.onChange)
	return bs
}

func (bs *breakers) onChange(ev BreakerEvent) {
	ev.Service = bs.service
	bs.transitions[ev.To].Add(1)
	if ev.Instance != "" {
		switch {
		case ev.From == BreakerClosed:
			bs.nonClosed.Add(1)
		case ev.To == BreakerClosed:
			bs.nonClosed.Add(-1)
		}
	}
	if bs.cfg.OnStateChange != nil {
		bs.cfg.OnStateChange(ev)
	}
	if ev.Instance == "" && ev.To == BreakerOpen {
		bs.resetEndpoints(ev.At)
	}
}

// resetEndpoints closes every endpoint breaker when the service's breaker opens: the failure
// is the service's, not an endpoint's, and the service's probe must not be followed by one
// probe per endpoint per caller once it closes.
func (bs *breakers) resetEndpoints(now time.Time) {
	if bs.nonClosed.Load() == 0 {
		return
	}
	bs.mu.Lock()
	var open []*breaker
	for _, b := range bs.endpoints {
		if b.State() != BreakerClosed {
			open = append(open, b)
		}
	}
	bs.mu.Unlock()
	for _, b := range open {
		b.forceClose(now, "the service's breaker opened", false, 0)
	}
}

// endpoint returns the breaker of the endpoint key, creating it.
func (bs *breakers) endpoint(key string, rand func() float64) *breaker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.endpoints[key]
	if b == nil {
		b = newBreaker(&bs.cfg, key, rand, bs.onChange)
		bs.endpoints[key] = b
	}
	return b
}

// blockedSet adds to skip the endpoints whose breakers reject calls now, and says how many.
func (bs *breakers) blockedSet(s *snapshot, now time.Time, skip map[string]bool) int {
	if bs.nonClosed.Load() == 0 {
		return 0
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	n := 0
	for _, inst := range s.instances {
		if b := bs.endpoints[inst.Key]; b != nil && !skip[inst.Key] && b.blocked(now) {
			skip[inst.Key] = true
			n++
		}
	}
	return n
}

// prune drops the breakers of endpoints gone from the list.
func (bs *breakers) prune(live func(key string) bool) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for k, b := range bs.endpoints {
		if !live(k) {
			if b.State() != BreakerClosed {
				bs.nonClosed.Add(-1)
			}
			delete(bs.endpoints, k)
		}
	}
}

// serviceTicket is the admission of one Do by the service's breaker.
type serviceTicket struct {
	local  ticket
	shared bool // decided by the coordinated breaker (its probe when local.probe is false and sharedProbe)
	// sharedProbe: this call holds the fleet-wide probe permit.
	sharedProbe bool
}

func (t serviceTicket) probe() bool { return t.local.probe || t.sharedProbe }

// admit asks the service's breaker (shared or local) to let one call through.
func (bs *breakers) admit(now time.Time) (serviceTicket, bool) {
	if bs.coord != nil && bs.coord.healthy(now) {
		st, ok := bs.coord.admit(now)
		if !ok {
			bs.rejected.Add(1)
		}
		return st, ok
	}
	t, ok := bs.svc.allow(now)
	if !ok {
		bs.rejected.Add(1)
	}
	return serviceTicket{local: t}, ok
}

// finish records the outcome of a Do admitted by st.
func (bs *breakers) finish(st serviceTicket, now time.Time, o outcome, d time.Duration) {
	if st.shared {
		bs.coord.finish(st, now, o, d)
		return
	}
	st.local.done(now, o, d)
}

// classify maps an attempt's error to a breaker outcome: a Permanent error is an answer
// (the dependency is up); the caller's own cancellation says nothing.
func classify(ctx context.Context, err error) outcome {
	switch {
	case err == nil, isPermanent(err):
		return outcomeSuccess
	case ctx.Err() != nil:
		return outcomeIgnored
	}
	return outcomeFailure
}

func isPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

type probeKey struct{}

// IsProbe reports whether the call Do passes ctx to is a half-open probe: of the service's
// breaker (local, or the fleet's one permit when coordinated) or of the endpoint's. A dependency's test double
// can count probes with it; a caller can give a probe a shorter timeout.
func IsProbe(ctx context.Context) bool {
	v, _ := ctx.Value(probeKey{}).(bool)
	return v
}

// BreakerInfo is the state of one breaker of a Client.
type BreakerInfo struct {
	// Instance is the endpoint's key, empty for the service's breaker.
	Instance string
	State    BreakerState
	// OpenUntil is the open deadline while Open.
	OpenUntil time.Time
}

// BreakerStats are a Client's breaker counters and states.
type BreakerStats struct {
	// Enabled is false when Config.Breaker.Disabled.
	Enabled bool
	// Service is the service's local breaker; Endpoints the endpoint breakers that are not
	// Closed, in key order.
	Service   BreakerInfo
	Endpoints []BreakerInfo
	// Transitions counts transitions into each state (indexed by BreakerState) of every
	// breaker of the Client; Rejected counts calls the service's breaker (or every endpoint
	// breaker) rejected; Probes counts half-open probes the Client sent.
	Transitions [3]int64
	Rejected    int64
	Probes      int64

	// Coordinated is set when the service's breaker is shared.
	Coordinated *CoordinatedStats
}

// CoordinatedStats describe a Client's view of its service's shared breaker.
type CoordinatedStats struct {
	// Shared is the shared state as the caller's cache has it; Fallback is true while the
	// caller uses its local breaker because the store is slow or unreachable.
	Shared   BreakerState
	Fallback bool
	// Fallbacks counts switches to the local breaker; Undecodable counts breaker keys whose
	// value did not decode (ignored); StoreWrites counts the store writes (lease grants,
	// puts and transactions) the breaker made; StoreErrors the failed ones.
	Fallbacks, Undecodable, StoreWrites, StoreErrors int64
	// Reports is how many callers' failure reports are live; ProbeHolder is the caller
	// holding the half-open permit ("" when none).
	Reports     int
	ProbeHolder string
}

// BreakerStats returns the Client's breaker counters and states.
func (c *Client) BreakerStats() BreakerStats {
	bs := c.brk
	if bs == nil {
		return BreakerStats{}
	}
	out := BreakerStats{
		Enabled:  true,
		Service:  BreakerInfo{State: bs.svc.State(), OpenUntil: bs.svc.openUntilTime()},
		Rejected: bs.rejected.Load(), Probes: bs.probes.Load(),
	}
	for i := range out.Transitions {
		out.Transitions[i] = bs.transitions[i].Load()
	}
	bs.mu.Lock()
	for k, b := range bs.endpoints {
		if st := b.State(); st != BreakerClosed {
			out.Endpoints = append(out.Endpoints, BreakerInfo{Instance: k, State: st, OpenUntil: b.openUntilTime()})
		}
	}
	bs.mu.Unlock()
	sort.Slice(out.Endpoints, func(i, j int) bool { return out.Endpoints[i].Instance < out.Endpoints[j].Instance })
	if bs.coord != nil {
		s := bs.coord.stats(c.now())
		out.Coordinated = &s
	}
	return out
}

// BreakerState is the state of inst's endpoint breaker (Closed when it has none).
func (c *Client) BreakerState(inst Instance) BreakerState {
	if c.brk == nil {
		return BreakerClosed
	}
	c.brk.mu.Lock()
	b := c.brk.endpoints[inst.Key]
	c.brk.mu.Unlock()
	if b == nil {
		return BreakerClosed
	}
	return b.State()
}

// Service is the Client's service name.
func (c *Client) Service() string { return c.cfg.Service }
