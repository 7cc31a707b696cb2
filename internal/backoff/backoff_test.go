package backoff

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	const base, max = 100 * time.Millisecond, 30 * time.Second
	tests := []struct {
		name   string
		n      int
		jitter float64
		f      float64
		want   time.Duration
	}{
		{"first failure, no jitter", 0, 0, 0.7, 100 * time.Millisecond},
		{"doubles", 3, 0, 0.7, 800 * time.Millisecond},
		{"capped at max", 20, 0, 0.7, max},
		{"huge n does not overflow", 1000, 0, 0.7, max},
		{"low end of jitter", 1, 0.2, 0, 160 * time.Millisecond},
		{"middle of jitter", 1, 0.2, 0.5, 200 * time.Millisecond},
		{"jitter applies at cap", 30, 0.5, 0, 15 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Delay(base, max, tt.jitter, tt.n, tt.f); got != tt.want {
				t.Errorf("Delay(n=%d, jitter=%v, f=%v) = %v, want %v", tt.n, tt.jitter, tt.f, got, tt.want)
			}
		})
	}
}

func TestRateLimiterCountsAndForgets(t *testing.T) {
	r := New[string](10*time.Millisecond, time.Second, 0)
	for i, want := range []time.Duration{10, 20, 40} {
		if got := r.When("a"); got != want*time.Millisecond {
			t.Fatalf("failure %d: got %v, want %v", i, got, want*time.Millisecond)
		}
	}
	if r.NumRequeues("a") != 3 || r.NumRequeues("b") != 0 {
		t.Fatalf("requeues: a=%d b=%d", r.NumRequeues("a"), r.NumRequeues("b"))
	}
	r.Forget("a")
	if got := r.When("a"); got != 10*time.Millisecond {
		t.Fatalf("after Forget: got %v, want 10ms", got)
	}
}

func TestRateLimiterSpreadsRetries(t *testing.T) {
	r := New[int](time.Second, time.Minute, 0.2)
	seen := map[time.Duration]bool{}
	lo, hi := time.Hour, time.Duration(0)
	for i := range 100 {
		d := r.When(i)
		seen[d] = true
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 800*time.Millisecond || hi > 1200*time.Millisecond {
		t.Fatalf("delays outside ±20%% of 1s: [%v, %v]", lo, hi)
	}
	if len(seen) < 50 {
		t.Fatalf("100 first retries produced only %d distinct delays: no spread", len(seen))
	}
}
