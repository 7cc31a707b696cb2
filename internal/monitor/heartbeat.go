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

	lease keyLease
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

// put writes the key (and the legacy key) under the writer's lease (keyLease).
func (h *Heartbeat) put(ctx context.Context, key, val string, interval time.Duration) (int64, error) {
	if h.Lease != nil && h.lease.lease == nil {
		h.lease = keyLease{lease: h.Lease, ttl: HeartbeatLeaseTTL(interval)}
	}
	opts, err := h.lease.opts(ctx)
	if err != nil {
		return 0, err
	}
	ops := []clientv3.Op{clientv3.OpPut(key, val, opts...)}
	if h.Legacy {
		ops = append(ops, clientv3.OpPut(wire.HeartbeatKey(h.Prefix), val))
	}
	resp, err := h.KV.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		h.lease.failed(err)
		return 0, err
	}
	return resp.Header.Revision, nil
}

// keyLease is the etcd lease of one writer's own keys: granted at the first write, kept
// alive every third of its TTL at a later write, granted again after it expired (a write
// failing with ErrLeaseNotFound), revoked when the writer stops. The zero value (no lease)
// adds nothing to a write.
type keyLease struct {
	lease     clientv3.Lease
	ttl       time.Duration
	id        clientv3.LeaseID
	keptAlive time.Time
}

// opts grants or keeps the lease alive as needed and returns the Put option attaching it.
func (k *keyLease) opts(ctx context.Context) ([]clientv3.OpOption, error) {
	if k.lease == nil {
		return nil, nil
	}
	switch {
	case k.id == 0:
		g, err := k.lease.Grant(ctx, max(int64(k.ttl/time.Second), 1))
		if err != nil {
			return nil, fmt.Errorf("grant its lease: %w", err)
		}
		k.id, k.keptAlive = g.ID, time.Now()
	case time.Since(k.keptAlive) >= k.ttl/3:
		if _, err := k.lease.KeepAliveOnce(ctx, k.id); err != nil {
			k.failed(err)
			return nil, fmt.Errorf("keep its lease alive: %w", err)
		}
		k.keptAlive = time.Now()
	}
	return []clientv3.OpOption{clientv3.WithLease(k.id)}, nil
}

// failed forgets an expired lease, so that the next write grants another.
func (k *keyLease) failed(err error) {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		k.id = 0
	}
}

// revoke ends the lease, deleting its keys; false when there was none to revoke.
func (k *keyLease) revoke(ctx context.Context) (bool, error) {
	if k.lease == nil || k.id == 0 {
		return false, nil
	}
	_, err := k.lease.Revoke(ctx, k.id)
	k.id = 0
	return true, err
}

// revoke ends the key's lease, deleting the key: callers stop counting this writer at once
// (another replica of the cluster, or the next leader, writes its own).
func (h *Heartbeat) revoke(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := h.lease.revoke(ctx); err != nil {
		h.Log.Info("heartbeat lease not revoked; the key goes when it expires", "key", h.Key(), "error", err.Error())
	}
}
