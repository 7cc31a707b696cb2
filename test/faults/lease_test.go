package faults

import (
	"fmt"
	"testing"
	"time"
)

// TestLeaseBackstop: every operator replica is gone for longer than the lease TTL. Off (the
// default) the endpoints stay; with --store-lease-ttl they expire, and come back when an
// operator runs again.
func TestLeaseBackstop(t *testing.T) {
	slow(t)
	const ttl, away = 3 * time.Second, 10 * time.Second
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("lease=%v", on), func(t *testing.T) {
			srv := startStore(t)
			s := newScenario(t, []string{srv.Endpoint()})
			cfg := s.operatorConfig()
			if on {
				cfg.extra = []string{fmt.Sprintf("--store-lease-ttl=%s", ttl)}
			}
			op := startOperator(t, "registrar", cfg)
			for range 3 {
				s.addReady()
			}
			s.converge(time.Now())
			op.Kill()
			killed := time.Now()
			var restarted time.Time
			s.checks.expiryAllowed = func(at time.Time) bool { return on && at.After(killed) && (restarted.IsZero() || at.Before(restarted)) }
			left := s.world.desired()
			var gone time.Duration
			if on {
				if !waitFor(time.Minute, func() bool {
					got, err := servicePods(s.ctx, s.store, s.checks.servicePrefix, s.checks.foreign)
					return err == nil && len(got) == 0
				}) {
					t.Fatal("endpoints did not expire with every operator gone")
				}
				gone = time.Since(killed)
			} else {
				time.Sleep(away) // nobody runs for longer than a TTL would be: scenario, not synchronisation
				got, err := servicePods(s.ctx, s.store, s.checks.servicePrefix, s.checks.foreign)
				if err != nil || !equal(got, left) {
					t.Fatalf("without the backstop the store holds %v (%v) after %s without an operator, want %v", got, err, away, left)
				}
			}
			op.start()
			restarted = time.Now()
			conv := s.converge(restarted)
			note := fmt.Sprintf("off: all %d endpoints stayed %s with no operator", len(left), away)
			if on {
				note = fmt.Sprintf("--store-lease-ttl=%s: endpoints expired %s after the last operator died; rewritten on restart", ttl, gone.Round(100*time.Millisecond))
			}
			s.finish(fmt.Sprintf("7. lease backstop %s, operator gone > TTL", map[bool]string{false: "off (default)", true: "on"}[on]), conv, note)
		})
	}
}
