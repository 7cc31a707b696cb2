package discovery

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
//
// The heartbeat is judged per cluster: every replica of every cluster's operator writes a
// heartbeat of its own ({prefix}/.registrar/heartbeat/{cluster}/{replica}), and the list is
// stale when the operator of a cluster it holds instances of (their cluster field) has not
// advanced any of its heartbeats: in a store shared by several clusters (--store-shared), a
// live cluster never hides a dead one. An empty list is judged by the freshest heartbeat of
// any cluster. The single leader's key {prefix}/.registrar/heartbeat counts for its value's
// cluster, and for every cluster when it names none (operators that predate the per-replica
// keys).
type Freshness struct {
	// Stale is true when the heartbeat of a cluster of the list has not advanced for
	// StaleAfter, or three of that operator's heartbeat intervals when that is longer (the
	// operator is stopped, cut off from the store, or the client's watch is stuck), or the
	// store has not confirmed the list for StaleAfter (see Client.Staleness).
	Stale bool
	// Reason says why, when Stale: "heartbeat" or "watch".
	Reason string
	// HeartbeatAge is how long ago the client saw the heartbeat of the list's least recently
	// heard-from cluster advance (before the first change it saw: since the heartbeat's own
	// time, or since the client started).
	HeartbeatAge time.Duration
	// HeartbeatRevision is the store revision of that cluster's last heartbeat seen (0: none).
	HeartbeatRevision int64
	// Writer is the operator process that wrote it.
	Writer string
	// StaleClusters are the clusters of the list whose heartbeat is too old ("" is the
	// cluster of instances without a cluster field), sorted.
	StaleClusters []string
	// WatchStaleness is Client.Staleness: how long ago the store last confirmed the list.
	WatchStaleness time.Duration
}

// maxHeartbeats bounds the heartbeat keys and clusters a client follows; beyond, new ones
// are ignored (a store holds one per operator replica).
const maxHeartbeats = 1024

// anyCluster is the cluster under which a heartbeat without a cluster counts: the single
// leader's key written by an operator that predates per-cluster heartbeats.
const anyCluster = "\x00any"

// clusterBeat is what the client knows of one cluster's heartbeats.
type clusterBeat struct {
	advanced int64 // unix nanoseconds one of its heartbeats was last seen advancing
	rev      int64
	interval time.Duration // the writer's heartbeat interval
	writer   string
}

// heartbeatWatch follows every heartbeat under {prefix}/.registrar/heartbeat (the single
// leader's key and each replica's). Its own goroutine, its own watch stream; one watch per
// Client, one small event per heartbeat interval and operator replica.
type heartbeatWatch struct {
	key      string
	mu       sync.Mutex
	revs     map[string]int64 // per heartbeat key: the last revision seen
	clusters map[string]*clusterBeat
	done     chan struct{}
}

// startHeartbeat starts following the heartbeats unless Config.IgnoreHeartbeat.
func (c *Client) startHeartbeat(ctx context.Context) {
	if c.cfg.IgnoreHeartbeat {
		return
	}
	c.hb = &heartbeatWatch{key: wire.HeartbeatKey(c.cfg.Prefix), revs: map[string]int64{},
		clusters: map[string]*clusterBeat{}, done: make(chan struct{})}
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
	now := c.now()
	grace := c.started.UnixNano() // a new client is not stale at once
	judged := map[string]bool{}
	for _, inst := range c.All() {
		judged[inst.Cluster] = true
	}
	c.hb.mu.Lock()
	defer c.hb.mu.Unlock()
	// beat is cluster's view: its own heartbeats, or the cluster-less single leader's when fresher.
	beat := func(cluster string) clusterBeat {
		b := clusterBeat{advanced: grace}
		for _, k := range []string{cluster, anyCluster} {
			if o := c.hb.clusters[k]; o != nil && o.advanced > b.advanced {
				b = *o
			}
		}
		return b
	}
	if len(judged) == 0 { // an empty list: is any operator writing?
		var best clusterBeat
		best.advanced = grace
		for _, o := range c.hb.clusters {
			if o.advanced > best.advanced {
				best = *o
			}
		}
		f.HeartbeatAge, f.HeartbeatRevision, f.Writer = max(now.Sub(time.Unix(0, best.advanced)), 0), best.rev, best.writer
		if f.HeartbeatAge > max(c.cfg.StaleAfter, 3*best.interval) && !f.Stale {
			f.Stale, f.Reason = true, "heartbeat"
		}
		return f
	}
	first := true
	for cluster := range judged {
		b := beat(cluster)
		age := max(now.Sub(time.Unix(0, b.advanced)), 0)
		// An operator that writes less often than StaleAfter/3 gets three of its intervals.
		if age > max(c.cfg.StaleAfter, 3*b.interval) {
			f.StaleClusters = append(f.StaleClusters, cluster)
		}
		if first || age > f.HeartbeatAge {
			f.HeartbeatAge, f.HeartbeatRevision, f.Writer = age, b.rev, b.writer
			first = false
		}
	}
	sort.Strings(f.StaleClusters)
	if len(f.StaleClusters) > 0 && !f.Stale {
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
	resp, err := c.cli.Get(gctx, c.hb.key, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return fmt.Errorf("read heartbeats %s: %w", c.hb.key, err)
	}
	rev := resp.Header.Revision
	c.forgetHeartbeatsBut(resp.Kvs) // deleted while no watch ran
	for _, kv := range resp.Kvs {
		c.observeHeartbeat(string(kv.Key), kv.ModRevision, kv.Value, true)
	}
	wctx, wcancel := context.WithCancel(metadata.AppendToOutgoingContext(
		clientv3.WithRequireLeader(ctx), "registrar-discovery-heartbeat", c.id))
	defer wcancel()
	wch := c.cli.Watch(wctx, c.hb.key, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
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
					c.observeHeartbeat(string(ev.Kv.Key), ev.Kv.ModRevision, ev.Kv.Value, false)
				} else {
					c.forgetHeartbeat(string(ev.Kv.Key))
				}
			}
		}
	}
}

// observeHeartbeat records the heartbeat key at revision rev. A newer revision seen on the
// watch is an advance now; on a (re)read, a newer revision counts from the heartbeat's own
// time (capped at now), since the client cannot tell when it was written otherwise. The
// advance counts for the key's cluster (the single leader's key: its value's cluster, or
// every cluster when it names none).
func (c *Client) observeHeartbeat(key string, rev int64, value []byte, read bool) {
	cluster, legacy, ok := wire.ParseHeartbeatKey(c.cfg.Prefix, key)
	if !ok {
		return
	}
	hb, err := wire.DecodeHeartbeat(value)
	if legacy {
		cluster = anyCluster
		if err == nil && hb.Cluster != "" {
			cluster = hb.Cluster
		}
	}
	c.hb.mu.Lock()
	defer c.hb.mu.Unlock()
	last, known := c.hb.revs[key]
	if rev <= last {
		return
	}
	b := c.hb.clusters[cluster]
	if (!known && len(c.hb.revs) >= maxHeartbeats) || (b == nil && len(c.hb.clusters) >= maxHeartbeats) {
		return
	}
	c.hb.revs[key] = rev
	if b == nil {
		b = &clusterBeat{}
		c.hb.clusters[cluster] = b
	}
	at := c.now()
	if read && err == nil && !hb.Time.IsZero() && hb.Time.Before(at) {
		at = hb.Time
	}
	if n := at.UnixNano(); n > b.advanced {
		b.advanced, b.rev = n, rev
		if err == nil {
			b.interval = time.Duration(hb.IntervalSeconds * float64(time.Second))
			b.writer = hb.Writer
		}
	}
}

// forgetHeartbeatsBut drops the heartbeat keys not among kvs (a fresh read of them all).
func (c *Client) forgetHeartbeatsBut(kvs []*mvccpb.KeyValue) {
	present := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		present[string(kv.Key)] = true
	}
	c.hb.mu.Lock()
	defer c.hb.mu.Unlock()
	for k := range c.hb.revs {
		if !present[k] {
			delete(c.hb.revs, k)
		}
	}
}

// forgetHeartbeat drops a deleted heartbeat key (a replica that stopped, or whose lease
// expired); its cluster keeps the time it last advanced.
func (c *Client) forgetHeartbeat(key string) {
	c.hb.mu.Lock()
	delete(c.hb.revs, key)
	c.hb.mu.Unlock()
}
