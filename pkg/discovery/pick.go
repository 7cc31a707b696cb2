package discovery

import (
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// health is the passive-ejection state: consecutive failures, last failure and ejection
// deadline per instance key. Entries of instances gone from the list are pruned.
type health struct {
	mu    sync.Mutex
	byKey map[string]*instanceHealth
	// any is false while byKey is empty, so picks skip the lock when nothing ever failed.
	any atomic.Bool
}

type instanceHealth struct {
	failures     int
	lastFailure  time.Time
	ejectedUntil time.Time
}

func (h *health) prune(live func(key string) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.byKey {
		if !live(k) {
			delete(h.byKey, k)
		}
	}
	h.any.Store(len(h.byKey) > 0)
}

// ReportFailure records a failed call to inst. After FailureThreshold consecutive failures
// the instance is ejected for EjectionTime, unless MaxEjectionPercent of the instances are
// ejected already. It reports whether inst is ejected now.
func (c *Client) ReportFailure(inst Instance) bool {
	s := c.snap.Load()
	if !contains(s, inst.Key) {
		return false // gone from the list already
	}
	now := c.now()
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	h := c.health.byKey[inst.Key]
	if h == nil {
		h = &instanceHealth{}
		c.health.byKey[inst.Key] = h
		c.health.any.Store(true)
	}
	h.failures++
	h.lastFailure = now
	if now.Before(h.ejectedUntil) {
		return true
	}
	if h.failures < c.cfg.FailureThreshold {
		return false
	}
	if c.ejectedLocked(s, now) >= maxEjected(len(s.instances), c.cfg.MaxEjectionPercent) {
		return false // the cap: keep enough instances in rotation
	}
	h.ejectedUntil = now.Add(c.cfg.EjectionTime)
	h.failures = 0
	return true
}

// ReportSuccess records a successful call to inst: its consecutive failures start again
// from zero (an ejection in progress runs its course).
func (c *Client) ReportSuccess(inst Instance) {
	if !c.health.any.Load() {
		return
	}
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	if h := c.health.byKey[inst.Key]; h != nil {
		h.failures = 0
	}
}

// Ejected reports whether inst is currently skipped by Pick.
func (c *Client) Ejected(inst Instance) bool {
	s := c.snap.Load()
	for i, e := range c.ejectedSet(s, c.now()) {
		if e && s.instances[i].Key == inst.Key {
			return true
		}
	}
	return false
}

func (c *Client) ejectedCount(s *snapshot, now time.Time) int {
	n := 0
	for _, e := range c.ejectedSet(s, now) {
		if e {
			n++
		}
	}
	return n
}

// ejectedSet marks the ejected instances of s, at most the cap of them (the list may have
// shrunk since they were ejected; the first in key order win). Nil when none is.
func (c *Client) ejectedSet(s *snapshot, now time.Time) []bool {
	if !c.health.any.Load() {
		return nil
	}
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	var set []bool
	allowed := maxEjected(len(s.instances), c.cfg.MaxEjectionPercent)
	for i, inst := range s.instances {
		if allowed == 0 {
			break
		}
		if h := c.health.byKey[inst.Key]; h != nil && now.Before(h.ejectedUntil) {
			if set == nil {
				set = make([]bool, len(s.instances))
			}
			set[i] = true
			allowed--
		}
	}
	return set
}

func (c *Client) ejectedLocked(s *snapshot, now time.Time) int {
	n := 0
	for _, inst := range s.instances {
		if h := c.health.byKey[inst.Key]; h != nil && now.Before(h.ejectedUntil) {
			n++
		}
	}
	return n
}

// Pick returns an instance by the configured strategy, skipping ejected ones. It never
// touches the network. Instances are picked in proportion to their weights (the store
// value's "weight", written while an instance is in its slow-start window; absent counts
// as full weight): when every instance has full weight, as without slow start, picks are
// equal. It returns ErrNoInstances when the list is empty.
func (c *Client) Pick() (Instance, error) { return c.pick(nil) }

// pick chooses among the instances that are neither ejected nor in exclude; when every
// instance not excluded is ejected it ignores ejection rather than fail.
func (c *Client) pick(exclude map[string]bool) (Instance, error) {
	s := c.snap.Load()
	n := len(s.instances)
	if n == 0 {
		return Instance{}, ErrNoInstances
	}
	ejected := c.ejectedSet(s, c.now())
	if ejected == nil && len(exclude) == 0 && c.cfg.Strategy != LeastRecentlyFailed && !c.cfg.Locality.active() {
		if s.cum != nil {
			return s.instances[weighted(s.cum, c.draw(s.cum[n-1]))], nil
		}
		return s.instances[c.index(n)], nil // the common case: no allocation
	}
	cand := candidates(s, ejected, exclude)
	if len(cand) == 0 {
		cand = candidates(s, nil, exclude)
	}
	if len(cand) == 0 {
		return Instance{}, ErrNoInstances
	}
	cand = c.cfg.Locality.nearest(s, cand) // the nearest usable tier (locality.go)
	if c.cfg.Strategy == LeastRecentlyFailed {
		return s.instances[c.leastRecentlyFailed(s, cand)], nil
	}
	return s.instances[c.among(s, cand)], nil
}

// among picks one of the candidates (indexes into s.instances): in proportion to their
// weights when the list has weights, else by index.
func (c *Client) among(s *snapshot, cand []int) int {
	if s.cum == nil {
		return cand[c.index(len(cand))]
	}
	cum := cumulative(s.instances, cand)
	return cand[weighted(cum, c.draw(cum[len(cum)-1]))]
}

// cumulative are the running sums of the effective weights of list (of its entries at
// the indexes of only, when only is not nil).
func cumulative(list []Instance, only []int) []int64 {
	if only == nil {
		cum := make([]int64, len(list))
		var sum int64
		for i := range list {
			sum += int64(list[i].EffectiveWeight())
			cum[i] = sum
		}
		return cum
	}
	cum := make([]int64, len(only))
	var sum int64
	for j, i := range only {
		sum += int64(list[i].EffectiveWeight())
		cum[j] = sum
	}
	return cum
}

// weighted is the index whose weight interval [cum[i-1], cum[i]) holds pos.
func weighted(cum []int64, pos int64) int {
	return sort.Search(len(cum), func(i int) bool { return cum[i] > pos })
}

// spreadStride is a prime: multiplying the round-robin counter by it modulo the total weight
// visits every position of [0, total) once per cycle, scattered, so a weighted round robin
// interleaves the instances instead of serving each one's whole weight in a row.
const spreadStride = 1_000_003

// draw is a position in [0, total) for a weighted pick: uniform for Random; for the
// round-robin strategies the shared counter, spread, so that over every total consecutive
// picks on an unchanged list each instance is picked exactly its weight's times.
func (c *Client) draw(total int64) int64 {
	if c.cfg.Strategy == Random {
		return rand.Int64N(total)
	}
	pos := int64(floorMod(c.rr.Add(1)-1, int(total)))
	if total%spreadStride == 0 {
		return pos
	}
	return pos * (spreadStride % total) % total
}

// index draws the next index in [0, n) for RoundRobin or Random.
func (c *Client) index(n int) int {
	if c.cfg.Strategy == Random {
		return rand.IntN(n)
	}
	return floorMod(c.rr.Add(1)-1, n)
}

func candidates(s *snapshot, ejected []bool, exclude map[string]bool) []int {
	cand := make([]int, 0, len(s.instances))
	for i, inst := range s.instances {
		if (ejected == nil || !ejected[i]) && !exclude[inst.Key] {
			cand = append(cand, i)
		}
	}
	return cand
}

// leastRecentlyFailed returns the candidate with the oldest last failure (never failed
// counts as oldest); equals take turns in round-robin order (weighted, when the list has
// weights).
func (c *Client) leastRecentlyFailed(s *snapshot, cand []int) int {
	c.health.mu.Lock()
	var ties []int
	var oldest time.Time
	for _, i := range cand {
		var at time.Time
		if h := c.health.byKey[s.instances[i].Key]; h != nil {
			at = h.lastFailure
		}
		switch {
		case len(ties) == 0 || at.Before(oldest):
			ties, oldest = append(ties[:0], i), at
		case at.Equal(oldest):
			ties = append(ties, i)
		}
	}
	c.health.mu.Unlock()
	return c.among(s, ties)
}

func contains(s *snapshot, key string) bool {
	_, found := slices.BinarySearchFunc(s.instances, key, func(inst Instance, k string) int { return strings.Compare(inst.Key, k) })
	return found
}
