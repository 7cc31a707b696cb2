package memlimit

import (
	"runtime"
	"testing"
	"time"
)

func TestHeadroomPercent(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		name    string
		percent int
		live    uint64
		want    int
	}{
		{"nothing live yet: the most headroom allowed", 50, 0, MaxGCPercent},
		{"a tiny heap: capped", 50, mi / 2, MaxGCPercent},
		{"1 MiB live: 8 MiB of headroom", 50, 1 * mi, 800},
		{"10 MiB live: 8 MiB of headroom", 50, 10 * mi, 80},
		{"8 MiB live: the floor is all of it", 50, 8 * mi, 100},
		{"16 MiB live: the proportion is the floor", 50, 16 * mi, 50},
		{"100 MiB live: the proportion", 50, 100 * mi, 50},
		{"a higher pacing is kept", 200, 10 * mi, 200},
		{"rounded up, never below the floor", 50, 12 * mi, 67},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HeadroomPercent(tc.percent, tc.live); got != tc.want {
				t.Fatalf("HeadroomPercent(%d, %d) = %d, want %d", tc.percent, tc.live, got, tc.want)
			}
		})
	}
}

// TestKeepHeadroom: after a collection the pacing is set from the live heap, and after stop
// no more.
func TestKeepHeadroom(t *testing.T) {
	calls := make(chan int, 64)
	// A pacing no heap reaches so that the first collection sets something (the floor).
	stop := KeepHeadroom(1, func(p int) int { calls <- p; return 0 })
	deadline := time.After(30 * time.Second)
	var got int
	for got == 0 {
		runtime.GC()
		select {
		case got = <-calls:
		case <-time.After(50 * time.Millisecond): // the finalizer runs after the collection
		case <-deadline:
			t.Fatal("no pacing set after collections")
		}
	}
	if got <= 1 || got > MaxGCPercent {
		t.Fatalf("pacing set to %d, want the floor's (above 1, at most %d)", got, MaxGCPercent)
	}
	stop()
	runtime.GC() // the finalizer armed before stop may still run once
	runtime.GC()
	runtime.GC()
	if n := len(calls); n > 1 {
		t.Fatalf("%d pacings set after stop", n)
	}
}
