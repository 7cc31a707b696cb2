package sharding

import (
	"time"

	"k8s.io/utils/clock"
)

// Lease is what membership reads of one replica's Lease.
type Lease struct {
	// Holder is the member's name (the Lease's holderIdentity).
	Holder string
	// Version changes whenever the holder renews (the Lease's resourceVersion).
	Version string
	// RenewTime is the holder's clock at its last renewal; trusted only the first time a
	// Lease is seen (see Membership).
	RenewTime time.Time
	// Duration is how long after a renewal the member counts as alive.
	Duration time.Duration
}

// Membership tells which members are alive from the Leases they renew. Like client-go's
// leader election it does not trust other replicas' clocks: a member is alive while its
// Lease changed, as observed on this replica's clock, less than its duration ago. A Lease
// seen for the first time is judged by its renewTime (the only time there is), so that a
// replica that starts does not wait a whole duration before it takes a dead member's shards.
type Membership struct {
	clock clock.PassiveClock
	seen  map[string]observation
}

type observation struct {
	version string
	at      time.Time // this replica's time of the last observed change
}

// NewMembership returns a Membership reading time from c.
func NewMembership(c clock.PassiveClock) *Membership {
	return &Membership{clock: c, seen: map[string]observation{}}
}

// Observe records the current Leases and returns the live members, sorted. A member whose
// Lease is gone (deleted on a clean shutdown) is no longer one.
func (m *Membership) Observe(leases []Lease) []string {
	now := m.clock.Now()
	next := make(map[string]observation, len(leases))
	var live []string
	for _, l := range leases {
		if l.Holder == "" || l.Duration <= 0 {
			continue
		}
		o, ok := m.seen[l.Holder]
		switch {
		case !ok:
			o = observation{version: l.Version, at: l.RenewTime}
			if l.RenewTime.After(now) { // a holder's clock ahead of ours: no credit beyond now
				o.at = now
			}
		case o.version != l.Version:
			o = observation{version: l.Version, at: now}
		}
		next[l.Holder] = o
		if now.Sub(o.at) < l.Duration {
			live = append(live, l.Holder)
		}
	}
	m.seen = next
	return sortedUnique(live)
}
