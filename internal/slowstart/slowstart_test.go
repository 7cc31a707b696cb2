package slowstart_test

import (
	"math"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/slowstart"
)

var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

func TestWeight(t *testing.T) {
	ten := slowstart.Ramp{Window: 10 * time.Second, MinWeight: 10}
	for _, tc := range []struct {
		name    string
		ramp    slowstart.Ramp
		elapsed time.Duration
		want    int32
	}{
		{"registration: the minimum", ten, 0, 10},
		{"within the first step", ten, 999 * time.Millisecond, 10},
		{"second step", ten, time.Second, 19},
		{"half way", ten, 5 * time.Second, 55},
		{"last step", ten, 9999 * time.Millisecond, 91},
		{"end of the window: full", ten, 10 * time.Second, 100},
		{"long after", ten, time.Hour, 100},
		{"registered in the future (skew): the minimum", ten, -5 * time.Second, 10},
		{"short window: fewer steps (3 × 1 s)", slowstart.Ramp{Window: 3 * time.Second, MinWeight: 50}, 2 * time.Second, 83},
		{"short window, first step", slowstart.Ramp{Window: 3 * time.Second, MinWeight: 50}, 0, 50},
		{"window under a second: one step", slowstart.Ramp{Window: 500 * time.Millisecond, MinWeight: 10}, 400 * time.Millisecond, 10},
		{"window under a second, over", slowstart.Ramp{Window: 500 * time.Millisecond, MinWeight: 10}, 500 * time.Millisecond, 100},
		{"long window: 10 steps of 6 min", slowstart.Ramp{Window: time.Hour, MinWeight: 1}, 13 * time.Minute, 20},
		{"minimum 0 is clamped to 1, never 0", slowstart.Ramp{Window: 10 * time.Second}, 0, 1},
		{"minimum above full is full", slowstart.Ramp{Window: 10 * time.Second, MinWeight: 400}, 0, 100},
		{"minimum 100: no ramp", slowstart.Ramp{Window: 10 * time.Second, MinWeight: 100}, 0, 100},
		{"no window: no ramp", slowstart.Ramp{MinWeight: 10}, 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ramp.Weight(t0, t0.Add(tc.elapsed)); got != tc.want {
				t.Errorf("Weight(+%v) = %d, want %d", tc.elapsed, got, tc.want)
			}
		})
	}
}

func TestNextChange(t *testing.T) {
	ten := slowstart.Ramp{Window: 10 * time.Second, MinWeight: 10}
	for _, tc := range []struct {
		name    string
		ramp    slowstart.Ramp
		elapsed time.Duration
		want    time.Duration // after registration; -1: none
	}{
		{"at registration: the next second", ten, 0, time.Second},
		{"mid step", ten, 4500 * time.Millisecond, 5 * time.Second},
		{"on a boundary: the next one", ten, 5 * time.Second, 6 * time.Second},
		{"last step: the end of the window", ten, 9500 * time.Millisecond, 10 * time.Second},
		{"at full weight: none", ten, 10 * time.Second, -1},
		{"in the future (skew): one step after registration", ten, -time.Minute, time.Second},
		{"disabled: none", slowstart.Ramp{}, 0, -1},
		{"minimum 100: none", slowstart.Ramp{Window: time.Minute, MinWeight: 100}, 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := tc.ramp.NextChange(t0, t0.Add(tc.elapsed))
			switch {
			case tc.want < 0 && ok:
				t.Errorf("NextChange(+%v) = %v, want none", tc.elapsed, at.Sub(t0))
			case tc.want >= 0 && (!ok || !at.Equal(t0.Add(tc.want))):
				t.Errorf("NextChange(+%v) = %v, %v; want %v", tc.elapsed, at.Sub(t0), ok, tc.want)
			}
		})
	}
}

// TestBoundedWrites: sampled every 10 ms over and past the window, the weight never is 0,
// never decreases, changes at most MaxSteps times (each change is one store write), and
// NextChange names the instant of each change.
func TestBoundedWrites(t *testing.T) {
	for _, ramp := range []slowstart.Ramp{
		{Window: 10 * time.Second, MinWeight: 10}, {Window: 90 * time.Second, MinWeight: 1},
		{Window: 2500 * time.Millisecond, MinWeight: 33}, {Window: 300 * time.Millisecond, MinWeight: 99},
	} {
		changes := 0
		prev := ramp.Weight(t0, t0)
		next, _ := ramp.NextChange(t0, t0)
		for at := t0; at.Before(t0.Add(ramp.Window + time.Second)); at = at.Add(10 * time.Millisecond) {
			w := ramp.Weight(t0, at)
			if w < 1 || w > slowstart.FullWeight || w < prev {
				t.Fatalf("%+v: weight %d at +%v after %d", ramp, w, at.Sub(t0), prev)
			}
			if w != prev {
				changes++
				if at.Before(next) {
					t.Fatalf("%+v: weight changed at +%v, before NextChange said (+%v)", ramp, at.Sub(t0), next.Sub(t0))
				}
				next, _ = ramp.NextChange(t0, at)
			}
			prev = w
		}
		if prev != slowstart.FullWeight || changes > slowstart.MaxSteps || changes != ramp.Steps() {
			t.Errorf("%+v: %d changes (steps %d), final weight %d", ramp, changes, ramp.Steps(), prev)
		}
	}
}

// TestScaleOutArithmetic is seed 002's 1-to-100 scale-out: one established instance at full
// weight and 99 new ones at Envoy's default minimum (10 %) give the old instance ~9.2 % of
// the traffic instead of its fair 1 % (≈5,505 of 60,000 RPS): slow start is for a few
// instances joining an established set, and a short window bounds how long the trap lasts.
func TestScaleOutArithmetic(t *testing.T) {
	ramp := slowstart.Ramp{Window: time.Minute, MinWeight: 10}
	old := float64(ramp.Weight(t0.Add(-time.Hour), t0))
	total := old
	for range 99 {
		total += float64(ramp.Weight(t0, t0))
	}
	share := old / total
	if rps := share * 60000; math.Abs(rps-5505) > 1 {
		t.Errorf("old instance gets %.0f RPS of 60,000 (share %.4f), want ≈5,505", rps, share)
	}
	total = old
	for range 99 {
		total += float64(ramp.Weight(t0, t0.Add(time.Minute)))
	}
	if share := old / total; share != 0.01 {
		t.Errorf("after the window the old instance's share is %.4f, want 0.01", share)
	}
}

func TestRampOf(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		ss   *v1beta1.SlowStartSpec
		want slowstart.Ramp
	}{
		{name: "no spec.slowStart: disabled", want: slowstart.Ramp{}},
		{name: "a zero window: disabled", ss: &v1beta1.SlowStartSpec{}, want: slowstart.Ramp{}},
		{name: "the default minimum", ss: &v1beta1.SlowStartSpec{WindowSeconds: 60},
			want: slowstart.Ramp{Window: time.Minute, MinWeight: slowstart.DefaultMinWeightPercent}},
		{name: "a minimum of its own", ss: &v1beta1.SlowStartSpec{WindowSeconds: 30, MinWeightPercent: 25},
			want: slowstart.Ramp{Window: 30 * time.Second, MinWeight: 25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := slowstart.RampOf(&v1beta1.ServiceRegistry{Spec: v1beta1.ServiceRegistrySpec{SlowStart: tc.ss}})
			if r != tc.want {
				t.Fatalf("RampOf = %+v, want %+v", r, tc.want)
			}
			w := r.Weigher(now)
			if (w == nil) != !r.Enabled() {
				t.Fatalf("Weigher nil = %v with the ramp enabled = %v", w == nil, r.Enabled())
			}
			if w != nil && w(now) != r.Weight(now, now) {
				t.Errorf("Weigher(now)(now) = %d, want %d", w(now), r.Weight(now, now))
			}
		})
	}
}
