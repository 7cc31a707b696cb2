package monitor

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// DefaultHeartbeatInterval is --heartbeat-interval's default.
const DefaultHeartbeatInterval = 5 * time.Second

// Heartbeat writes {prefix}/.registrar/heartbeat every Interval while this replica leads:
// one small Put per interval, whatever the number of registries. Callers (pkg/discovery)
// report their list stale when it stops advancing. It is a manager Runnable.
type Heartbeat struct {
	KV     clientv3.KV
	Prefix string
	// Writer identifies this process in the value.
	Writer string
	// Interval between writes (DefaultHeartbeatInterval when zero); Timeout of each write
	// (the interval when zero).
	Interval, Timeout time.Duration
	Log               logr.Logger
}

// NeedLeaderElection: only the leader writes.
func (h *Heartbeat) NeedLeaderElection() bool { return true }

// Start writes until ctx ends.
func (h *Heartbeat) Start(ctx context.Context) error {
	interval := h.Interval
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	timeout := h.Timeout
	if timeout <= 0 || timeout > interval {
		timeout = interval
	}
	key := wire.HeartbeatKey(h.Prefix)
	t := time.NewTicker(interval)
	defer t.Stop()
	var seq, rev int64
	failing := false
	for {
		seq++
		r, err := h.write(ctx, key, wire.Heartbeat{Writer: h.Writer, Time: time.Now().UTC(), Seq: seq,
			IntervalSeconds: interval.Seconds(), Revision: rev}, timeout)
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

func (h *Heartbeat) write(ctx context.Context, key string, hb wire.Heartbeat, timeout time.Duration) (int64, error) {
	val, err := wire.EncodeHeartbeat(hb)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	resp, err := h.KV.Put(ctx, key, string(val))
	if err != nil {
		if ctx.Err() == nil || context.Cause(ctx) == context.DeadlineExceeded {
			metrics.HeartbeatWrites.WithLabelValues("error").Inc()
		}
		return 0, fmt.Errorf("write heartbeat %s: %w", key, err)
	}
	metrics.HeartbeatWriteDuration.Observe(time.Since(start).Seconds())
	metrics.HeartbeatWrites.WithLabelValues("ok").Inc()
	metrics.HeartbeatLastSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
	return resp.Header.Revision, nil
}
