package etcd

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// health remembers whether the last call reached the store.
type health struct {
	mu   sync.Mutex
	down bool
	// wake tells Start that the store went down (buffered, never blocks).
	wake chan struct{}
}

// Down reports whether the last call failed to reach the store.
func (s *Store) Down() bool {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.down
}

// callTimeout is Timeout, or the shorter ProbeTimeout while the store is known down.
func (s *Store) callTimeout() time.Duration {
	if s.Down() {
		return s.opts.ProbeTimeout
	}
	return s.opts.Timeout
}

// observe records the outcome of one call. A call the caller itself cancelled says nothing
// about the store.
func (s *Store) observe(ctx context.Context, err error) {
	if err != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return
	}
	s.health.mu.Lock()
	was := s.health.down
	s.health.down = err != nil
	s.health.mu.Unlock()
	switch {
	case err != nil && !was:
		select {
		case s.health.wake <- struct{}{}:
		default:
		}
	case err == nil && was && s.opts.OnRecover != nil:
		s.opts.OnRecover()
	}
}

// Start probes the store while it is unreachable, resetting the client's reconnect backoff
// before each probe, so that its return is noticed within ProbeInterval (and OnRecover
// called) even when every caller is waiting out a long backoff. It returns when ctx ends;
// it is a manager Runnable, started once this replica leads. With Options.LeaseTTL it first
// adopts the installation's endpoint lease and keeps it alive, before any write: a restart or
// failover with nothing to write must not let the predecessor's endpoints expire.
func (s *Store) Start(ctx context.Context) error {
	if s.backstop != nil {
		s.adoptLease(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.health.wake:
		}
		for s.Down() {
			jittered := time.Duration(float64(s.opts.ProbeInterval) * (0.8 + 0.4*rand.Float64()))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(jittered):
			}
			s.probe(ctx)
		}
	}
}

// probe reads one key under the prefix with ProbeTimeout.
func (s *Store) probe(ctx context.Context) {
	if c, ok := s.kv.(interface{ ActiveConnection() *grpc.ClientConn }); ok {
		if conn := c.ActiveConnection(); conn != nil {
			conn.ResetConnectBackoff()
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.ProbeTimeout)
	defer cancel()
	_, err := s.kv.Get(ctx, s.opts.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	s.observe(ctx, err)
}
