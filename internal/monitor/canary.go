package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// DefaultCanaryInterval is --canary-interval's default.
const DefaultCanaryInterval = 10 * time.Second

// Path is one canary path: a synthetic endpoint written the way registrar writes, and read
// the way callers read.
type Path interface {
	// Write registers the synthetic endpoint for round seq and returns what Visible waits
	// for.
	Write(ctx context.Context, seq int64) (token any, err error)
	// Visible returns once a caller sees the write, or ctx's error.
	Visible(ctx context.Context, token any) error
	// Cleanup removes the synthetic endpoint (when the canary stops).
	Cleanup(ctx context.Context) error
}

// Canary runs rounds on a Path every Interval while this replica leads, and exports the
// registrar_canary_* metrics. It is a manager Runnable.
type Canary struct {
	// Store labels the metrics.
	Store string
	Path  Path
	// Interval between rounds (DefaultCanaryInterval when zero); Timeout bounds a round's
	// write and, separately, its wait for visibility (the interval when zero or larger).
	Interval, Timeout time.Duration
	// OnRound, when set, is called after a round that made the canary start or stop
	// counting as failing (CanaryFailAfter rounds in a row), e.g. Prober.Wake.
	OnRound func()
	Log     logr.Logger

	mu    sync.Mutex
	state CanaryState
}

// NeedLeaderElection: only the leader writes.
func (c *Canary) NeedLeaderElection() bool { return true }

// State is the canary's recent outcome.
func (c *Canary) State() CanaryState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Start runs rounds until ctx ends, then removes the synthetic endpoint.
func (c *Canary) Start(ctx context.Context) error {
	interval := c.Interval
	if interval <= 0 {
		interval = DefaultCanaryInterval
	}
	timeout := c.Timeout
	if timeout <= 0 || timeout > interval {
		timeout = interval
	}
	metrics.CanaryFailures.WithLabelValues(c.Store, "write").Add(0)
	metrics.CanaryFailures.WithLabelValues(c.Store, "visible").Add(0)
	metrics.CanaryFailures.WithLabelValues(c.Store, "cleanup").Add(0)
	t := time.NewTicker(interval)
	defer t.Stop()
	for seq := int64(1); ; seq++ {
		_ = c.Round(ctx, seq, timeout) // recorded in the metrics and State
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := c.Path.Cleanup(cctx); err != nil {
				metrics.CanaryFailures.WithLabelValues(c.Store, "cleanup").Inc()
				c.Log.Info("canary endpoint not removed", "store", c.Store, "error", err.Error())
			}
			return nil
		case <-t.C:
		}
	}
}

// Round runs one canary round and records it; it returns the round's error.
func (c *Canary) Round(ctx context.Context, seq int64, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	token, err := c.Path.Write(wctx, seq)
	cancel()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		c.record(ctx, "write", fmt.Errorf("canary write: %w", err), 0)
		return err
	}
	written := time.Now()
	vctx, cancel := context.WithTimeout(ctx, timeout)
	err = c.Path.Visible(vctx, token)
	cancel()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("canary not visible to callers %s after the store acknowledged it: %w", timeout, err)
		}
		c.record(ctx, "visible", err, 0)
		return err
	}
	c.record(ctx, "", nil, time.Since(written))
	return nil
}

func (c *Canary) record(_ context.Context, stage string, err error, took time.Duration) {
	c.mu.Lock()
	was := c.state.ConsecutiveFailures
	if err != nil {
		c.state.ConsecutiveFailures++
		c.state.LastErr = err
	} else {
		c.state = CanaryState{}
	}
	c.mu.Unlock()
	if err != nil {
		metrics.CanaryProbes.WithLabelValues(c.Store, "failed").Inc()
		metrics.CanaryFailures.WithLabelValues(c.Store, stage).Inc()
		metrics.CanaryUp.WithLabelValues(c.Store).Set(0)
		if was == 0 {
			c.Log.Info("canary round failed", "store", c.Store, "stage", stage, "error", err.Error())
		}
	} else {
		metrics.CanaryProbes.WithLabelValues(c.Store, "ok").Inc()
		metrics.CanaryVisibility.WithLabelValues(c.Store).Observe(took.Seconds())
		metrics.CanaryUp.WithLabelValues(c.Store).Set(1)
		metrics.CanaryLastSuccess.WithLabelValues(c.Store).Set(float64(time.Now().UnixNano()) / 1e9)
		if was > 0 {
			c.Log.Info("canary succeeds again", "store", c.Store, "failedRounds", was)
		}
	}
	now := c.State().ConsecutiveFailures
	if c.OnRound != nil && (was >= CanaryFailAfter) != (now >= CanaryFailAfter) {
		c.OnRound()
	}
}

// CanaryAddress is the synthetic endpoint's address: TEST-NET-1 (RFC 5737), never routed.
const CanaryAddress = "192.0.2.1"

// EtcdPath is the canary path of the etcd store: it writes a wire.Endpoint under
// {prefix}/.registrar/canary/{namespace}/{cluster}.{replica} (wire.CanaryPod: a key of this
// writer's own, which no other cluster's or replica's canary writes or deletes) with the
// operator's client and reads it back
// with a pkg/discovery Client (the callers' library: list, watch, decode) on its own
// connection. No caller sees it: pkg/discovery refuses service names with a leading dot.
type EtcdPath struct {
	kv     clientv3.KV
	lease  keyLease
	key    string
	ep     wire.Endpoint
	reader *discovery.Client
	sub    *discovery.Subscription
}

// EtcdPathConfig configures NewEtcdPath.
type EtcdPathConfig struct {
	// KV writes (the operator's store client).
	KV clientv3.KV
	// Prefix is the operator's --store-prefix.
	Prefix string
	// Reader reads (a client of its own, as a caller's would be); the path does not close
	// it. ReaderEndpoints are dialled instead when Reader is nil (closed by Close).
	Reader          *clientv3.Client
	ReaderEndpoints []string
	// Namespace names the synthetic endpoint's directory (the fence's name); Cluster (the
	// cluster ID) and Replica (this replica) its pod, wire.CanaryPod.
	Namespace, Cluster, Replica string
	// Lease, when set, attaches the synthetic endpoint to a lease of its own with LeaseTTL
	// (CanaryLeaseTTL of the interval; at least 1 s), kept alive by the rounds and revoked
	// by Cleanup: the key of a writer that died ages out.
	Lease    clientv3.Lease
	LeaseTTL time.Duration
}

// CanaryLeaseTTL is the TTL of the canary endpoint's lease with rounds every interval: ten
// intervals, at least 30 s.
func CanaryLeaseTTL(interval time.Duration) time.Duration { return max(10*interval, 30*time.Second) }

// NewEtcdPath starts the reading client.
func NewEtcdPath(cfg EtcdPathConfig) (*EtcdPath, error) {
	reader, err := discovery.New(discovery.Config{
		Client: cfg.Reader, Endpoints: cfg.ReaderEndpoints,
		Prefix: wire.ReservedKey(cfg.Prefix), Service: wire.CanaryName,
		IgnoreHeartbeat: true, Breaker: discovery.BreakerConfig{Disabled: true},
		ProbeInterval: time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("canary reader: %w", err)
	}
	pod := wire.CanaryPod(cfg.Cluster, cfg.Replica)
	p := &EtcdPath{
		kv: cfg.KV, lease: keyLease{lease: cfg.Lease, ttl: cfg.LeaseTTL},
		key: wire.CanaryPrefix(cfg.Prefix) + cfg.Namespace + "/" + pod, reader: reader,
		ep: wire.Endpoint{Service: wire.CanaryName, Namespace: cfg.Namespace, Pod: pod, Address: CanaryAddress,
			Ports: map[string]int32{}, Owner: "registrar-canary", Cluster: cfg.Cluster},
	}
	p.sub = reader.Subscribe()
	return p, nil
}

// Key is the synthetic endpoint's key.
func (p *EtcdPath) Key() string { return p.key }

// Close stops the reading client.
func (p *EtcdPath) Close() error {
	p.sub.Close()
	return p.reader.Close()
}

// Write puts the synthetic endpoint (its UID carries seq) and returns the revision.
func (p *EtcdPath) Write(ctx context.Context, seq int64) (any, error) {
	ep := p.ep
	ep.UID = fmt.Sprintf("canary-%d", seq)
	ep.RegisteredAt = time.Now().UTC()
	val, err := wire.Encode(&ep)
	if err != nil {
		return nil, err
	}
	opts, err := p.lease.opts(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := p.kv.Put(ctx, p.key, string(val), opts...)
	if err != nil {
		p.lease.failed(err)
		return nil, err
	}
	return resp.Header.Revision, nil
}

// Visible waits until the reader's list holds the key at the written revision or later.
func (p *EtcdPath) Visible(ctx context.Context, token any) error {
	rev, _ := token.(int64)
	for {
		for _, inst := range p.reader.All() {
			if inst.Key == p.key && inst.Revision >= rev {
				return nil
			}
		}
		if _, err := p.sub.Next(ctx); err != nil {
			return err
		}
	}
}

// Cleanup deletes the synthetic endpoint (revoking its lease, when it has one).
func (p *EtcdPath) Cleanup(ctx context.Context) error {
	if revoked, err := p.lease.revoke(ctx); revoked && err == nil {
		return nil
	}
	_, err := p.kv.Delete(ctx, p.key)
	return err
}
