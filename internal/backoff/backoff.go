// Package backoff provides a per-item exponential rate limiter with jitter for controller
// work queues, so that registries failing together (a store outage) do not retry together.
package backoff

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// RateLimiter implements client-go's workqueue.TypedRateLimiter: the n-th consecutive failure
// of an item waits base*2^n, capped at max, scaled by a random factor in [1-jitter, 1+jitter].
type RateLimiter[T comparable] struct {
	base, max time.Duration
	jitter    float64
	rand      func() float64

	mu       sync.Mutex
	failures map[T]int
}

// New returns a RateLimiter. jitter is clamped to [0, 1].
func New[T comparable](base, max time.Duration, jitter float64) *RateLimiter[T] {
	return &RateLimiter[T]{
		base: base, max: max, jitter: math.Min(math.Max(jitter, 0), 1),
		rand: rand.Float64, failures: map[T]int{},
	}
}

// When records a failure of item and returns how long to wait before retrying it.
func (r *RateLimiter[T]) When(item T) time.Duration {
	r.mu.Lock()
	n := r.failures[item]
	r.failures[item] = n + 1
	f := r.rand()
	r.mu.Unlock()
	return Delay(r.base, r.max, r.jitter, n, f)
}

// Forget clears the failures of item, after it succeeded.
func (r *RateLimiter[T]) Forget(item T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failures, item)
}

// NumRequeues is the number of consecutive failures of item.
func (r *RateLimiter[T]) NumRequeues(item T) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures[item]
}

// Delay is the wait after the n-th consecutive failure (n from 0), with f in [0,1) the
// random draw: min(base*2^n, max) * (1 + jitter*(2f-1)).
func Delay(base, max time.Duration, jitter float64, n int, f float64) time.Duration {
	d := float64(max)
	if n < 62 {
		d = math.Min(float64(base)*math.Pow(2, float64(n)), float64(max))
	}
	return time.Duration(d * (1 + jitter*(2*f-1)))
}
