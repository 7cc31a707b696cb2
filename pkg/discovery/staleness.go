package discovery

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/registrar-dev/registrar/pkg/wire"
)

// DefaultStaleAfter is Config.StaleAfter when unset: three of the operator's default 5 s
// heartbeats.
const DefaultStaleAfter = 15 * time.Second

// Freshness says whether a Client's list can be trusted to be current. The client keeps
// serving its last known-good list whatever Freshness says: a stale list of instances is
// more useful to a caller than none.
type Freshness struct {
	// Stale is true when the operator's heartbeat has not advanced for StaleAfter, or three
	// of the operator's heartbeat intervals when that is longer (the operator is stopped,
	// cut off from the store, or the client's watch is stuck), or the store has not
	// confirmed the list for StaleAfter (see Client.Staleness).
	Stale bool
	// Reason says why, when Stale: "heartbeat" or "watch".
	Reason string
	// HeartbeatAge is how long ago the client saw the heartbeat advance (before the first
	// change it saw: since the heartbeat's own time, or since the client started).
	HeartbeatAge time.Duration
	// HeartbeatRevision is the store revision of the last heartbeat seen (0: none).
	HeartbeatRevision int64
	// Writer is the operator process that wrote the last heartbeat seen.
	Writer string
	// WatchStaleness is Client.Staleness: how long ago the store last confirmed the list.
	WatchStaleness time.Duration
}

// heartbeatWatch follows {prefix}/.registrar/heartbeat. Its own goroutine, its own watch
// stream; one watch per Client, one small event per heartbeat interval.
type heartbeatWatch struct {
	key      string
	advanced atomic.Int64 // unix nanoseconds the heartbeat was last seen advancing
	rev      atomic.Int64
	interval atomic.Int64 // the writer's heartbeat interval, nanoseconds
	mu       sync.Mutex
	writer   string
	done     chan struct{}
}

// startHeartbeat starts following the heartbeat unless Config.IgnoreHeartbeat.
func (c *Client) startHeartbeat(ctx context.Context) {
	if c.cfg.IgnoreHeartbeat {
		return
	}
	c.hb = &heartbeatWatch{key: wire.HeartbeatKey(c.cfg.Prefix), done: make(chan struct{})}
	c.hb.advanced.Store(c.now().UnixNano()) // grace: a new client is not stale at once
	go c.followHeartbeat(ctx)
}

// stopHeartbeat waits for the heartbeat goroutine (its ctx already cancelled).
func (c *Client) stopHeartbeat() {
	if c.hb != nil {
		<-c.hb.done
	}
}

// Freshness reports whether the list is current; see Freshness.
func (c *Client) Freshness() Freshness {
	f := Freshness{WatchStaleness: c.Staleness()}
	if c.LastSync().IsZero() {
		f.WatchStaleness = time.Since(c.started)
	}
	if f.WatchStaleness > c.cfg.StaleAfter {
		f.Stale, f.Reason = true, "watch"
	}
	if c.hb == nil {
		return f
	}
	f.HeartbeatAge = max(c.now().Sub(time.Unix(0, c.hb.advanced.Load())), 0)
	f.HeartbeatRevision = c.hb.rev.Load()
	c.hb.mu.Lock()
	f.Writer = c.hb.writer
	c.hb.mu.Unlock()
	// An operator that writes less often than StaleAfter/3 gets three of its intervals.
	if f.HeartbeatAge > max(c.cfg.StaleAfter, 3*time.Duration(c.hb.interval.Load())) && !f.Stale {
		f.Stale, f.Reason = true, "heartbeat"
	}
	return f
}

// Stale reports Freshness().Stale: the list may be out of date; it is kept and served.
func (c *Client) Stale() bool { return c.Freshness().Stale }

// HeartbeatAge is Freshness().HeartbeatAge.
func (c *Client) HeartbeatAge() time.Duration { return c.Freshness().HeartbeatAge }

// followHeartbeat reads the heartbeat and watches it (with progress notifications, so a
// silent watch is told from a dead one), reconnecting with full-jitter backoff.
func (c *Client) followHeartbeat(ctx context.Context) {
	defer close(c.hb.done)
	attempt := 0
	for {
		if err := c.heartbeatSession(ctx); err == nil || ctx.Err() != nil {
			if ctx.Err() != nil {
				return
			}
			attempt = 0
		}
		t := time.NewTimer(fullJitter(c.cfg.BackoffBase, c.cfg.BackoffMax, attempt, c.rand()))
		attempt++
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (c *Client) heartbeatSession(ctx context.Context) error {
	gctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	resp, err := c.cli.Get(gctx, c.hb.key)
	cancel()
	if err != nil {
		return fmt.Errorf("read heartbeat %s: %w", c.hb.key, err)
	}
	rev := resp.Header.Revision
	if len(resp.Kvs) == 1 {
		c.observeHeartbeat(resp.Kvs[0].ModRevision, resp.Kvs[0].Value, true)
	}
	wctx, wcancel := context.WithCancel(metadata.AppendToOutgoingContext(
		clientv3.WithRequireLeader(ctx), "registrar-discovery-heartbeat", c.id))
	defer wcancel()
	wch := c.cli.Watch(wctx, c.hb.key, clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	// No answer at all (events, progress) for StaleAfter: start over with a fresh read.
	silence := time.NewTimer(c.cfg.StaleAfter)
	defer silence.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-silence.C:
			return fmt.Errorf("heartbeat watch silent for %s", c.cfg.StaleAfter)
		case wr, ok := <-wch:
			if !ok {
				return fmt.Errorf("heartbeat watch closed")
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("heartbeat watch: %w", err)
			}
			silence.Reset(c.cfg.StaleAfter)
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					c.observeHeartbeat(ev.Kv.ModRevision, ev.Kv.Value, false)
				}
			}
		}
	}
}

// observeHeartbeat records a heartbeat at revision rev. A newer revision seen on the watch
// is an advance now; on a (re)read, a newer revision counts from the heartbeat's own time
// (capped at now), since the client cannot tell when it was written otherwise.
func (c *Client) observeHeartbeat(rev int64, value []byte, read bool) {
	if rev <= c.hb.rev.Load() {
		return
	}
	c.hb.rev.Store(rev)
	hb, err := wire.DecodeHeartbeat(value)
	at := c.now()
	if read && err == nil && !hb.Time.IsZero() && hb.Time.Before(at) {
		at = hb.Time
	}
	if n := at.UnixNano(); n > c.hb.advanced.Load() {
		c.hb.advanced.Store(n)
	}
	if err == nil {
		c.hb.interval.Store(int64(hb.IntervalSeconds * float64(time.Second)))
		c.hb.mu.Lock()
		c.hb.writer = hb.Writer
		c.hb.mu.Unlock()
	}
}
