package main

import (
	"testing"
	"time"
)

// TestEndpointEventBudget checks the flags' mapping onto the token bucket: 0 allows none.
func TestEndpointEventBudget(t *testing.T) {
	now := time.Unix(100, 0)
	for _, tt := range []struct {
		qps   float64
		burst int
		want  int // Events allowed at one instant, out of 100
	}{{qps: 10, burst: 50, want: 50}, {qps: 0, burst: 50, want: 0}, {qps: 10, burst: 0, want: 0}, {qps: -1, burst: 5, want: 0}} {
		b := endpointEventBudget(tt.qps, tt.burst)
		b.SetBurstAt(now, b.Burst())
		got := 0
		for range 100 {
			if b.AllowN(now, 1) {
				got++
			}
		}
		if got != tt.want {
			t.Errorf("qps %v burst %d: %d allowed, want %d", tt.qps, tt.burst, got, tt.want)
		}
	}
}
