package monitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// DefaultHeartbeatInterval is --heartbeat-interval's default.
const DefaultHeartbeatInterval = 5 * time.Second

// Heartbeat writes this replica's heartbeat, {prefix}/.registrar/heartbeat/{cluster}/{replica}
// (wire.ReplicaHeartbeatKey), every Interval while it runs: one small write per interval,
// whatever the number of registries. Its key is this writer's own, attached to an etcd lease
// of its own (HeartbeatLeaseTTL) that is revoked when it stops, so that neither another
// cluster's operator nor another replica of this one (--sharding=lease) ever hides or
// deletes it, and a dead replica's key ages out. With Legacy it also writes the single
// leader's key {prefix}/.registrar/heartbeat (callers that predate the per-replica keys),
// in the same transaction. Callers (pkg/discovery) report their list stale when no
// heartbeat of the clusters they read advances. It is a manager Runnable.
type Heartbeat struct {
	KV clientv3.KV
	// Lease grants and keeps the key's lease (the store client); nil writes the key without
	// a lease (it stays after the writer dies).
	Lease  clientv3.Lease
	Prefix string
	// Cluster is this cluster's ID (the endpoints' cluster field); Replica names this replica
	// (its pod, or --shard-id). Both name the key.
	Cluster, Replica string
	// Writer identifies this process in the value.
	Writer string
	// Legacy also writes wire.HeartbeatKey: only when one replica of one cluster writes the
	// prefix (leader election, no --store-shared).
	Legacy bool
	// Interval between writes (DefaultHeartbeatInterval when zero); Timeout of each write
	// (the interval when zero).
	Interval, Timeout time.Duration
	Log               logr.Logger

	lease     clientv3.LeaseID
	keptAlive time.Time
}

// HeartbeatLeaseTTL is the TTL of the lease of a heartbeat written every interval: ten
// intervals, at least 30 s; a dead writer's key goes that long after its last keep-alive.
func HeartbeatLeaseTTL(interval time.Duration) time.Duration {
	return max(10*interval, 30*time.Second)
}

// NeedLeaderElection: with leader election only the leader writes; with --sharding=lease
// (no leader election) every replica writes its own key.
func (h *Heartbeat) NeedLeaderElection() bool { return true }

// Key is this writer's heartbeat key.
func (h *Heartbeat) Key() string { return wire.ReplicaHeartbeatKey(h.Prefix, h.Cluster, h.Replica) }

// Start writes until ctx ends, then revokes the key's lease (deleting the key).
func (h *Heartbeat) Start(ctx context.Context) error {
	interval := h.Interval
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	timeout := h.Timeout
	if timeout <= 0 || timeout > interval {
		timeout = interval
	}
	key := h.Key()
	defer h.revoke(timeout)
	t := time.NewTicker(interval)
	defer t.Stop()
	var seq, rev int64
	failing := false
	for {
		seq++
		r, err := h.write(ctx, key, wire.Heartbeat{Writer: h.Writer, Cluster: h.Cluster, Replica: h.Replica,
			Time: time.Now().UTC(), Seq: seq, IntervalSeconds: interval.Seconds(), Revision: rev}, interval, timeout)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				h.Log.Info("heartbeat write failed; callers will report their lists stale if this lasts", "key", key, "error", err.Error())
			}
			failing = true
		case err == nil:
			if failing {
				h.Log.Info("heartbeat written again", "key", key, "revision", r)
			}
			failing, rev = false, r
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (h *Heartbeat) write(ctx context.Context, key string, hb wire.Heartbeat, interval, timeout time.Duration) (int64, error) {
	val, err := wire.EncodeHeartbeat(hb)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	rev, err := h.put(ctx, key, string(val), interval)
	if err != nil {
		if ctx.Err() == nil || context.Cause(ctx) == context.DeadlineExceeded {
			metrics.HeartbeatWrites.WithLabelValues("error").Inc()
		}
		return 0, fmt.Errorf("write heartbeat %s: %w", key, err)
	}
	metrics.HeartbeatWriteDuration.Observe(time.Since(start).Seconds())
	metrics.HeartbeatWrites.WithLabelValues("ok").Inc()
	metrics.HeartbeatLastSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
	return rev, nil
}

// put writes the key (and the legacy key) under the writer's lease, granting it first and
// keeping it alive every third of its TTL; a lease that expired meanwhile is granted again
// at the next write.
func (h *Heartbeat) put(ctx context.Context, key, val string, interval time.Duration) (int64, error) {
	var opts []clientv3.OpOption
	if h.Lease != nil {
		ttl := HeartbeatLeaseTTL(interval)
		switch {
		case h.lease == 0:
			g, err := h.Lease.Grant(ctx, int64(ttl/time.Second))
			if err != nil {
				return 0, fmt.Errorf("grant its lease: %w", err)
			}
			h.lease, h.keptAlive = g.ID, time.Now()
		case time.Since(h.keptAlive) >= ttl/3:
			if _, err := h.Lease.KeepAliveOnce(ctx, h.lease); err != nil {
				if errors.Is(err, rpctypes.ErrLeaseNotFound) {
					h.lease = 0
				}
				return 0, fmt.Errorf("keep its lease alive: %w", err)
			}
			h.keptAlive = time.Now()
		}
		opts = append(opts, clientv3.WithLease(h.lease))
	}
	ops := []clientv3.Op{clientv3.OpPut(key, val, opts...)}
	if h.Legacy {
		ops = append(ops, clientv3.OpPut(wire.HeartbeatKey(h.Prefix), val))
	}
	resp, err := h.KV.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			h.lease = 0
		}
		return 0, err
	}
	return resp.Header.Revision, nil
}

// revoke ends the key's lease, deleting the key: callers stop counting this writer at once
// (another replica of the cluster, or the next leader, writes its own).
func (h *Heartbeat) revoke(timeout time.Duration) {
	if h.Lease == nil || h.lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := h.Lease.Revoke(ctx, h.lease); err != nil {
		h.Log.Info("heartbeat lease not revoked; the key goes when it expires", "key", h.Key(), "error", err.Error())
	}
	h.lease = 0
}
