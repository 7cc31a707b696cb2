package controlplane

import (
	"math"
	"slices"
	"time"
)

// LagStats are percentiles of lags, in milliseconds.
type LagStats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Ms"`
	P90 float64 `json:"p90Ms"`
	P99 float64 `json:"p99Ms"`
	Max float64 `json:"maxMs"`
}

// SystemResult is one system's outcome over the measured transitions.
type SystemResult struct {
	Name string `json:"name"`
	// Transitions the harness wrote that this system was expected to show.
	Transitions int `json:"transitions"`
	// Observed transitions; Lost ones never showed; Unexpected writes matched none.
	Observed   int `json:"observed"`
	Lost       int `json:"lost"`
	Unexpected int `json:"unexpected"`
	// Unmeasured transitions did show, but in a gap of the timing watch (it lost its position
	// and listed again): the system made them, when is unknown, so they have no lag.
	Unmeasured int `json:"unmeasured"`
	// WatchResumed counts the times the system's timing watch ended and resumed from the last
	// position it processed; WatchRelisted the times it had lost that position and listed again.
	WatchResumed  int `json:"watchResumed"`
	WatchRelisted int `json:"watchRelisted"`
	// Writes the system made (store events, EndpointSlice changes) and per transition.
	Writes              int     `json:"writes"`
	WritesPerTransition float64 `json:"writesPerTransition"`
	// Sustained is observed transitions per second of busy time (each round's first write to
	// its last observation).
	Sustained      float64            `json:"transitionsPerSecond"`
	BusySeconds    float64            `json:"busySeconds"`
	Registration   LagStats           `json:"registrationLag"`
	Deregistration LagStats           `json:"deregistrationLag"`
	ByCause        map[Cause]LagStats `json:"byCause"`
}

// Summarise computes nearest-rank percentiles of lags.
func Summarise(lags []time.Duration) LagStats {
	if len(lags) == 0 {
		return LagStats{}
	}
	s := slices.Clone(lags)
	slices.Sort(s)
	return LagStats{N: len(s), P50: ms(percentile(s, 50)), P90: ms(percentile(s, 90)),
		P99: ms(percentile(s, 99)), Max: ms(s[len(s)-1])}
}

// percentile is the nearest-rank p-th percentile of sorted (non-empty).
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }
