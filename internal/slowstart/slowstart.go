// Package slowstart decides the weight of an endpoint in its slow-start window: a newly
// registered pod starts at a minimum share of the traffic and ramps up to full weight over
// the window, as Envoy's slow_start_config does (with aggression 1.0: a linear ramp). It is
// pure: the caller passes the time the endpoint was registered and the current time.
//
// The ramp is quantised into at most MaxSteps steps per window, so an endpoint's weight
// changes (and its store value is rewritten) at most MaxSteps times after its registration:
// the store write cost of slow start is bounded per pod start, whatever the window.
package slowstart

import (
	"time"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// FullWeight is the weight at the end of the window (and of endpoints without slow start).
const FullWeight = wire.FullWeight

// MaxSteps bounds the weight changes per window.
const MaxSteps = 10

// MinStep is the shortest step: a window shorter than MaxSteps × MinStep has fewer steps.
const MinStep = time.Second

// Ramp is one registry's slow start.
type Ramp struct {
	// Window is how long after its registration an endpoint ramps up; 0 disables slow start.
	Window time.Duration
	// MinWeight is the weight at registration, 1 to FullWeight (values outside are clamped).
	MinWeight int32
}

// Enabled reports whether the ramp slows anything down.
func (r Ramp) Enabled() bool { return r.Window > 0 && r.minWeight() < FullWeight }

func (r Ramp) minWeight() int32 { return min(max(r.MinWeight, 1), FullWeight) }

// Steps is the number of steps of the window: MaxSteps, fewer for a window shorter than
// MaxSteps × MinStep, at least 1.
func (r Ramp) Steps() int {
	if r.Window <= 0 {
		return 0
	}
	return int(min(max(r.Window/MinStep, 1), MaxSteps))
}

func (r Ramp) step() time.Duration { return r.Window / time.Duration(r.Steps()) }

// Weight is the weight of an endpoint registered at registeredAt, at now: the minimum in the
// first step, then linearly up towards FullWeight, and FullWeight from the end of the window
// on. A registration time in the future (clock skew) counts as the first step. Never 0.
func (r Ramp) Weight(registeredAt, now time.Time) int32 {
	if !r.Enabled() {
		return FullWeight
	}
	k := r.stepAt(registeredAt, now)
	n := int64(r.Steps())
	if k >= n {
		return FullWeight
	}
	lo := int64(r.minWeight())
	return int32(lo + (FullWeight-lo)*k/n)
}

// stepAt is the index of the step now falls in (0 before or at registration).
func (r Ramp) stepAt(registeredAt, now time.Time) int64 {
	elapsed := now.Sub(registeredAt)
	if elapsed <= 0 {
		return 0
	}
	return int64(elapsed / r.step())
}

// NextChange is when the weight of an endpoint registered at registeredAt changes next
// after now: the start of the next step. ok is false once it has reached FullWeight.
func (r Ramp) NextChange(registeredAt, now time.Time) (at time.Time, ok bool) {
	if !r.Enabled() {
		return time.Time{}, false
	}
	k := r.stepAt(registeredAt, now)
	if k >= int64(r.Steps()) {
		return time.Time{}, false
	}
	if now.Before(registeredAt) {
		return registeredAt.Add(r.step()), true
	}
	return registeredAt.Add(time.Duration(k+1) * r.step()), true
}

// DefaultMinWeightPercent is spec.slowStart.minWeightPercent when unset.
const DefaultMinWeightPercent = 10

// RampOf is the registry's slow start; disabled (zero) without spec.slowStart.
func RampOf(reg *v1beta1.ServiceRegistry) Ramp {
	ss := reg.Spec.SlowStart
	if ss == nil || ss.WindowSeconds <= 0 {
		return Ramp{}
	}
	r := Ramp{Window: time.Duration(ss.WindowSeconds) * time.Second, MinWeight: DefaultMinWeightPercent}
	if ss.MinWeightPercent > 0 {
		r.MinWeight = ss.MinWeightPercent
	}
	return r
}

// Weigher is the weight of an endpoint registered at registeredAt, at now (a plan.Weigher);
// nil (no weight written) when the ramp is disabled.
func (r Ramp) Weigher(now time.Time) func(registeredAt time.Time) int32 {
	if r.Window <= 0 {
		return nil
	}
	return func(registeredAt time.Time) int32 { return r.Weight(registeredAt, now) }
}
