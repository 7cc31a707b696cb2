package discovery

import "time"

// SetClock replaces the clock of c's ejections (tests only).
func SetClock(c *Client, now func() time.Time) { c.now = now }

// SetRoundRobinCounter sets c's round-robin counter (tests only).
func SetRoundRobinCounter(c *Client, v int64) { c.rr.Store(v) }

// NewWithClock is New with the clock of ejections and breakers set before any goroutine
// starts (tests only).
func NewWithClock(cfg Config, now func() time.Time) (*Client, error) { return newWithClock(cfg, now) }
