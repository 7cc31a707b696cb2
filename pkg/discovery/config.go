package discovery

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Strategy says how Pick chooses among the instances that are not ejected.
type Strategy int

const (
	// RoundRobin cycles through the instances in key order. The counter is shared by all
	// goroutines; over any run of picks on an unchanged list every instance is picked
	// equally often (±1).
	RoundRobin Strategy = iota
	// Random picks uniformly at random.
	Random
	// LeastRecentlyFailed picks the instance whose last reported failure is the oldest
	// (instances that never failed first), in round-robin order among equals.
	LeastRecentlyFailed
)

// String is the strategy's name.
func (s Strategy) String() string {
	switch s {
	case RoundRobin:
		return "RoundRobin"
	case Random:
		return "Random"
	case LeastRecentlyFailed:
		return "LeastRecentlyFailed"
	}
	return "Unknown"
}

// Config configures a Client. Only Service and one of Endpoints or Client are required.
type Config struct {
	// Endpoints are etcd client URLs, e.g. http://127.0.0.1:2379. Ignored when Client is set.
	Endpoints []string
	// Client is an existing etcd client to use instead of dialling Endpoints; the Client
	// does not close it.
	Client *clientv3.Client
	// TLS, Username and Password apply when the Client dials Endpoints itself.
	TLS                *tls.Config
	Username, Password string
	// DialTimeout bounds the first connection (default 5s).
	DialTimeout time.Duration

	// Prefix is the operator's --store-prefix (default DefaultPrefix).
	Prefix string
	// Service is the service name (the ServiceRegistry's spec.serviceName).
	Service string
	// AllServices makes the client list and watch every service under Prefix ({prefix}/)
	// instead of one: the instances of all services, in key order, for readers that serve
	// every registry (a read API such as cmd/eureka-api). Service and Namespace must then be
	// empty. The reserved subtree ({prefix}/.registrar/) and keys that are not
	// {prefix}/{service}/{namespace}/{pod} are skipped. Pick and Do pick across services, so
	// such a client is for listing; its breakers are off.
	AllServices bool
	// Namespace, when set, scopes the client to the instances of Service registered from
	// that Kubernetes namespace ({prefix}/{service}/{namespace}/): a caller that knows which
	// team's service it wants never receives another namespace's instances, whatever the
	// operator's --service-name-tenancy (docs/security.md, "Tenancy"). Empty watches every
	// namespace of the service.
	Namespace string

	// Strategy chooses how Pick balances (default RoundRobin).
	Strategy Strategy
	// Locality makes Pick prefer the caller's cluster, then its zone (locality.go); the zero
	// value prefers nothing.
	Locality Locality

	// RequestTimeout bounds each list of the service's keys (default 5s).
	RequestTimeout time.Duration
	// ProbeInterval is how often a connected client asks the store, on its watch stream, to
	// confirm the list is current (default 2s). ProbeTimeout is how long without any answer
	// makes it consider the store unreachable and reconnect (default 6s).
	ProbeInterval, ProbeTimeout time.Duration
	// BackoffBase and BackoffMax bound the reconnect backoff: the n-th consecutive failed
	// attempt waits a uniform random time in [0, min(BackoffMax, BackoffBase*2^n))
	// ("full jitter"). Defaults 500ms and 30s.
	BackoffBase, BackoffMax time.Duration

	// FailureThreshold is how many consecutive ReportFailure calls eject an instance
	// (default 1).
	FailureThreshold int
	// EjectionTime is how long an ejected instance is skipped (default 30s).
	EjectionTime time.Duration
	// MaxEjectionPercent caps the share of instances ejected at once (default 50). At least
	// one instance of two or more can always be ejected; a lone instance never is.
	MaxEjectionPercent int

	// Breaker configures the circuit breakers Do goes through (default: per-instance
	// breakers for the service and for each endpoint; see BreakerConfig).
	Breaker BreakerConfig

	// StaleAfter is how long without the heartbeat of the operator of a cluster the list
	// holds instances of advancing (or without the store confirming the list) makes the
	// client report its list stale (default DefaultStaleAfter). The list is kept and served
	// either way; see Client.Freshness.
	StaleAfter time.Duration
	// IgnoreHeartbeat stops the client from following the operators' heartbeats
	// ({prefix}/.registrar/heartbeat and the per-replica keys under it): for stores no
	// registrar operator writes. Staleness then comes from the watch alone.
	IgnoreHeartbeat bool

	// OnReconnect, when set, is called from the client's goroutine each time it schedules a
	// reconnect; it must not block. Use it to log or count store outages.
	OnReconnect func(Reconnect)
}

// Reconnect describes one scheduled reconnect.
type Reconnect struct {
	// Attempt counts consecutive failed attempts, from 0.
	Attempt int
	// Delay is the jittered wait before the next attempt.
	Delay time.Duration
	// Err is why the previous attempt or watch ended.
	Err error
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.AllServices && (c.Service != "" || c.Namespace != ""):
		return c, errors.New("discovery: Config.AllServices watches every service: Config.Service and Config.Namespace must be empty")
	case c.AllServices:
		c.Breaker.Disabled = true // breakers are per service; a client of every service only lists
	case c.Service == "":
		return c, errors.New("discovery: Config.Service is required (or Config.AllServices)")
	}
	if c.Client == nil && len(c.Endpoints) == 0 {
		return c, errors.New("discovery: Config.Endpoints or Config.Client is required")
	}
	setDefault(&c.DialTimeout, 5*time.Second)
	setDefault(&c.RequestTimeout, 5*time.Second)
	setDefault(&c.ProbeInterval, 2*time.Second)
	setDefault(&c.ProbeTimeout, 3*c.ProbeInterval)
	setDefault(&c.BackoffBase, 500*time.Millisecond)
	setDefault(&c.BackoffMax, 30*time.Second)
	setDefault(&c.EjectionTime, 30*time.Second)
	setDefault(&c.StaleAfter, DefaultStaleAfter)
	if c.FailureThreshold <= 0 {
		c.FailureThreshold = 1
	}
	if c.MaxEjectionPercent <= 0 {
		c.MaxEjectionPercent = 50
	}
	c.MaxEjectionPercent = min(c.MaxEjectionPercent, 100)
	if strings.HasPrefix(c.Service, ".") || strings.Contains(c.Service, "/") {
		return c, fmt.Errorf("discovery: Config.Service %q is not a service name (no leading dot, no slash)", c.Service)
	}
	if c.Namespace != "" && (strings.HasPrefix(c.Namespace, ".") || strings.Contains(c.Namespace, "/")) {
		return c, fmt.Errorf("discovery: Config.Namespace %q is not a namespace name (no leading dot, no slash)", c.Namespace)
	}
	if !c.Breaker.Disabled {
		var err error
		if c.Breaker, err = c.Breaker.withDefaults(); err != nil {
			return c, err
		}
	}
	return c, nil
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// fullJitter is the wait before reconnect attempt n (from 0) given a uniform draw f in
// [0, 1): f * min(max, base*2^n).
func fullJitter(base, max time.Duration, n int, f float64) time.Duration {
	ceiling := float64(max)
	if n < 62 {
		ceiling = math.Min(float64(base)*math.Pow(2, float64(n)), float64(max))
	}
	return time.Duration(f * ceiling)
}

// maxEjected is how many of n instances may be ejected at once under percent.
func maxEjected(n, percent int) int {
	if n <= 1 {
		return 0
	}
	return max(n*percent/100, 1)
}

// floorMod is x mod n in [0, n) for any x, so a wrapped (negative) counter still indexes
// the list. n must be positive.
func floorMod(x int64, n int) int {
	m := x % int64(n)
	if m < 0 {
		m += int64(n)
	}
	return int(m)
}
