package discovery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/metadata"

	"github.com/registrar-dev/registrar/pkg/wire"
)

// ErrNoInstances is returned by Pick and Do when the service has no usable instance.
var ErrNoInstances = errors.New("discovery: no instances")

// ErrClosed is returned by Subscription.Next after the Client or the Subscription closed.
var ErrClosed = errors.New("discovery: closed")

// clientIDs numbers the Clients of this process.
var clientIDs atomic.Int64

// Client keeps the live instances of one service, pushed from the store. It is safe for
// concurrent use. Create it with New and Close it when done.
type Client struct {
	cfg    Config
	id     string // names the client's own watch stream
	cli    *clientv3.Client
	ownCli bool
	prefix string
	rand   func() float64
	now    func() time.Time // the clock of ejections

	snap      atomic.Pointer[snapshot]
	lastSync  atomic.Int64 // unix nanoseconds; 0 = never
	connected atomic.Bool
	rr        atomic.Int64
	stats     counters
	health    health
	brk       *breakers // nil when Config.Breaker.Disabled

	syncedOnce sync.Once
	synced     chan struct{}
	subsMu     sync.Mutex
	subs       map[*Subscription]struct{}

	cancel  context.CancelFunc
	done    chan struct{}
	started time.Time
	hb      *heartbeatWatch // nil with Config.IgnoreHeartbeat (staleness.go)

	// Owned by the run goroutine.
	rev      int64
	needList bool
}

// snapshot is an immutable list of instances sorted by key.
type snapshot struct {
	instances []Instance
	rev       int64
	// cum are the running sums of the instances' weights (wire.Endpoint.EffectiveWeight);
	// nil when every instance has full weight, so picks stay unweighted.
	cum []int64
}

// newSnapshot is the snapshot of a sorted list.
func newSnapshot(list []Instance, rev int64) *snapshot {
	s := &snapshot{instances: list, rev: rev}
	for _, inst := range list {
		if inst.EffectiveWeight() != wire.FullWeight {
			s.cum = cumulative(list, nil)
			break
		}
	}
	return s
}

type counters struct {
	lists, resumes, reconnects, undecodable atomic.Int64
}

// New starts a Client for cfg.Service. It returns at once; the first list happens in the
// background (use WaitSynced to wait for it). A store that is down at start is not an
// error: the client keeps reconnecting and Pick returns ErrNoInstances until it has a list.
func New(cfg Config) (*Client, error) { return newWithClock(cfg, time.Now) }

func newWithClock(cfg Config, now func() time.Time) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg: cfg, id: strconv.FormatInt(clientIDs.Add(1), 10), cli: cfg.Client, prefix: watchPrefix(cfg), rand: rand.Float64, now: now,
		synced: make(chan struct{}), subs: map[*Subscription]struct{}{}, done: make(chan struct{}),
		needList: true,
	}
	c.health.byKey = map[string]*instanceHealth{}
	c.snap.Store(&snapshot{})
	if c.cli == nil {
		if c.cli, err = dial(cfg); err != nil {
			return nil, err
		}
		c.ownCli = true
	}
	if !cfg.Breaker.Disabled {
		c.brk = newBreakers(cfg.Breaker, cfg.Service, func() float64 { return c.rand() })
		if cfg.Breaker.Coordinated != nil {
			c.brk.coord = newCoordinated(c, c.brk)
			c.brk.coord.start()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.started = now()
	c.startHeartbeat(ctx)
	go c.run(ctx)
	return c, nil
}

func dial(cfg Config) (*clientv3.Client, error) {
	bo := grpcbackoff.DefaultConfig
	bo.MaxDelay = cfg.BackoffMax // reconnect to the store no later than our own backoff would
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints, DialTimeout: cfg.DialTimeout, TLS: cfg.TLS,
		Username: cfg.Username, Password: cfg.Password,
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: cfg.DialTimeout})},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("discovery: connect to %v: %w", cfg.Endpoints, err)
	}
	return cli, nil
}

// Close stops the watch and closes the etcd client the Client dialled itself. Pick and All
// keep answering from the last list.
func (c *Client) Close() error {
	c.cancel()
	<-c.done
	c.stopHeartbeat()
	if c.brk != nil && c.brk.coord != nil {
		c.brk.coord.stop()
	}
	c.notify()
	if c.ownCli {
		return c.cli.Close()
	}
	return nil
}

// WaitSynced blocks until the first list of the service succeeded, or ctx is done.
func (c *Client) WaitSynced(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("discovery: waiting for the first list of %s: %w", c.prefix, ctx.Err())
	}
}

// All returns the instances in key order. The slice is shared: do not modify it.
func (c *Client) All() []Instance { return c.snap.Load().instances }

// Connected reports whether the client is in contact with the store: its last list or watch
// response succeeded and the watch has not failed since.
func (c *Client) Connected() bool { return c.connected.Load() }

// LastSync is the last time the store confirmed the list was current (the list, a watch
// event or an answer to the client's progress probe); zero before the first list.
func (c *Client) LastSync() time.Time {
	if n := c.lastSync.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Staleness is how long ago the store last confirmed the list. While connected it stays
// below about ProbeInterval; while the store is unreachable it grows, and the client keeps
// serving the last known-good list. It is zero before the first list.
func (c *Client) Staleness() time.Duration {
	if n := c.lastSync.Load(); n != 0 {
		return time.Since(time.Unix(0, n))
	}
	return 0
}

// Stats are counters of a Client's life, for logs and metrics.
type Stats struct {
	// Instances is the size of the current list; Ejected how many of them are ejected.
	Instances, Ejected int
	// Revision is the store revision the list reflects.
	Revision int64
	// Connected, LastSync: as the methods of the same name.
	Connected bool
	LastSync  time.Time
	// Lists counts full lists (the first, and each after a compacted revision); Resumes
	// counts attempts to resume the watch from the last revision; Reconnects counts
	// scheduled reconnects; Undecodable counts values skipped because they were not an
	// instance (not JSON, or no address).
	Lists, Resumes, Reconnects, Undecodable int64
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	s := c.snap.Load()
	return Stats{
		Instances: len(s.instances), Ejected: c.ejectedCount(s, c.now()), Revision: s.rev,
		Connected: c.Connected(), LastSync: c.LastSync(),
		Lists: c.stats.lists.Load(), Resumes: c.stats.resumes.Load(),
		Reconnects: c.stats.reconnects.Load(), Undecodable: c.stats.undecodable.Load(),
	}
}

// run lists and watches until ctx is done, reconnecting with full-jitter backoff.
func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	attempt, compacted := 0, false
	for {
		synced, err := c.session(ctx)
		c.setConnected(false)
		if ctx.Err() != nil {
			return
		}
		if synced {
			attempt = 0
		}
		if errors.Is(err, rpctypes.ErrCompacted) {
			// The revision to resume from is gone: list again, at once the first time (the
			// store is reachable, it just said so), after a backoff if that repeats.
			c.needList = true
			if compacted = !compacted; compacted {
				continue
			}
		} else {
			compacted = false
		}
		delay := fullJitter(c.cfg.BackoffBase, c.cfg.BackoffMax, attempt, c.rand())
		c.stats.reconnects.Add(1)
		if c.cfg.OnReconnect != nil {
			c.cfg.OnReconnect(Reconnect{Attempt: attempt, Delay: delay, Err: err})
		}
		attempt++
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session lists when needed, then watches from the last revision until the watch fails or
// the store stops answering probes. synced says whether the store confirmed the list.
func (c *Client) session(ctx context.Context) (synced bool, err error) {
	if c.needList {
		if err := c.list(ctx); err != nil {
			return false, err
		}
		synced = true
	} else {
		c.stats.resumes.Add(1)
	}
	// A gRPC watch stream of its own (the etcd client shares one per distinct metadata):
	// the server answers a progress request only when every watch on the stream is caught
	// up, so the probe must not depend on other watches of a shared etcd client.
	wctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(
		clientv3.WithRequireLeader(ctx), "registrar-discovery-client", c.id))
	defer cancel()
	wch, err := c.openWatch(wctx)
	if err != nil {
		return synced, err
	}
	probe := time.NewTicker(c.cfg.ProbeInterval)
	defer probe.Stop()
	lastHeard := time.Now()
	c.requestProgress(wctx)
	for {
		select {
		case <-ctx.Done():
			return synced, ctx.Err()
		case resp, ok := <-wch:
			if !ok {
				return synced, fmt.Errorf("watch %s closed", c.prefix)
			}
			if err := resp.Err(); err != nil {
				return synced, fmt.Errorf("watch %s from revision %d: %w", c.prefix, c.rev, err)
			}
			lastHeard = time.Now()
			if c.handle(&resp) {
				synced = true
			}
		case <-probe.C:
			if silent := time.Since(lastHeard); silent > c.cfg.ProbeTimeout {
				return synced, fmt.Errorf("store silent for %s on the watch of %s", silent.Round(time.Millisecond), c.prefix)
			}
			c.requestProgress(wctx)
		}
	}
}

// openWatch starts the watch from c.rev. The etcd client's Watch blocks until the server
// created the watch, retrying the connection meanwhile, so it runs aside and is given up
// (wctx cancelled by the caller, which ends it) after ProbeTimeout.
func (c *Client) openWatch(wctx context.Context) (clientv3.WatchChan, error) {
	opened, rev := make(chan clientv3.WatchChan, 1), c.rev
	go func() {
		// From c.rev, not c.rev+1: the server answers progress requests only once the store
		// has reached a watch's start revision; the events at c.rev (applied) are skipped.
		opened <- c.cli.Watch(wctx, c.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithCreatedNotify())
	}()
	t := time.NewTimer(c.cfg.ProbeTimeout)
	defer t.Stop()
	select {
	case wch := <-opened:
		return wch, nil
	case <-t.C:
		return nil, fmt.Errorf("watch %s from revision %d: not established after %s", c.prefix, c.rev, c.cfg.ProbeTimeout)
	}
}

// handle applies one watch response and reports whether it confirmed the list is current.
func (c *Client) handle(resp *clientv3.WatchResponse) bool {
	c.setConnected(true)
	switch {
	case resp.Created:
		return false
	case resp.IsProgressNotify():
		c.rev = max(c.rev, resp.Header.Revision)
	case len(resp.Events) > 0:
		c.apply(resp.Events)
	}
	c.markSynced()
	return true
}

// requestProgress asks the server to confirm, on the watch stream, the revision it has sent
// up to. It waits at most one probe interval for the stream to take the request.
func (c *Client) requestProgress(wctx context.Context) {
	ctx, cancel := context.WithTimeout(wctx, c.cfg.ProbeInterval)
	defer cancel()
	_ = c.cli.RequestProgress(ctx) // an unanswered probe shows as silence
}

// list reads every key of the service and replaces the snapshot.
func (c *Client) list(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("list %s: %w", c.prefix, err)
	}
	byKey := make(map[string]Instance, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		c.put(byKey, kv)
	}
	c.rev, c.needList = resp.Header.Revision, false
	c.stats.lists.Add(1)
	// The store answered: connected from here (set before the list is published, so a
	// subscriber that sees the list sees it connected), and a failure before the watch is
	// established is reported as a disconnection.
	c.setConnected(true)
	c.replace(byKey)
	c.markSynced()
	return nil
}

// apply applies the events newer than c.rev to a copy of the snapshot's sorted list, each
// by binary search (the one copy an immutable snapshot needs; no rebuild or sort of the
// service), and publishes it.
func (c *Client) apply(events []*clientv3.Event) {
	events = slices.DeleteFunc(slices.Clone(events), func(ev *clientv3.Event) bool { return ev.Kv.ModRevision <= c.rev })
	if c.cfg.AllServices {
		// The operator's own keys (heartbeats every few seconds) are under the watched
		// prefix too: skip them without rebuilding the list, but keep their revision.
		for _, ev := range events {
			c.rev = max(c.rev, ev.Kv.ModRevision)
		}
		events = slices.DeleteFunc(events, func(ev *clientv3.Event) bool { return !isInstanceKey(c.cfg.Prefix, string(ev.Kv.Key)) })
	}
	if len(events) == 0 {
		return
	}
	cur := c.snap.Load().instances
	list := make([]Instance, len(cur), len(cur)+len(events))
	copy(list, cur)
	var gone []string
	for _, ev := range events {
		key := string(ev.Kv.Key)
		i, found := slices.BinarySearchFunc(list, key, func(inst Instance, k string) int { return strings.Compare(inst.Key, k) })
		inst, ok := Instance{}, false
		if ev.Type != mvccpb.DELETE {
			inst, ok = c.decode(ev.Kv)
		}
		switch {
		case ok && found:
			list[i] = inst
		case ok:
			list = slices.Insert(list, i, inst)
		case found:
			list = slices.Delete(list, i, i+1)
			gone = append(gone, key)
		}
		c.rev = max(c.rev, ev.Kv.ModRevision)
	}
	if len(gone) > 0 {
		c.forget(gone)
	}
	c.publish(list)
}

// put adds the instance of kv to byKey (a list being built), or removes its key when the
// value does not decode.
func (c *Client) put(byKey map[string]Instance, kv *mvccpb.KeyValue) {
	if inst, ok := c.decode(kv); ok {
		byKey[inst.Key] = inst
	} else {
		delete(byKey, string(kv.Key))
	}
}

// decode is the instance of kv; false for a key of no instance (the reserved subtree, with
// AllServices) and for a value that does not decode (counted).
func (c *Client) decode(kv *mvccpb.KeyValue) (Instance, bool) {
	if c.cfg.AllServices && !isInstanceKey(c.cfg.Prefix, string(kv.Key)) {
		return Instance{}, false // the reserved subtree or a key of no instance: not counted as undecodable
	}
	inst, err := DecodeInstance(string(kv.Key), kv.Value, kv.ModRevision)
	if err != nil {
		c.stats.undecodable.Add(1)
		return Instance{}, false
	}
	return inst, true
}

// replace publishes the instances of byKey (a full list), sorted, and forgets the health
// and breakers of every other key.
func (c *Client) replace(byKey map[string]Instance) {
	list := make([]Instance, 0, len(byKey))
	for _, inst := range byKey {
		list = append(list, inst)
	}
	slices.SortFunc(list, func(a, b Instance) int { return strings.Compare(a.Key, b.Key) })
	live := func(key string) bool { _, ok := byKey[key]; return ok }
	c.health.prune(live)
	if c.brk != nil {
		c.brk.prune(live)
	}
	c.publish(list)
}

// forget drops the health and breakers of keys that left the list.
func (c *Client) forget(keys []string) {
	gone := func(key string) bool { return slices.Contains(keys, key) }
	c.health.prune(func(key string) bool { return !gone(key) })
	if c.brk != nil {
		c.brk.prune(func(key string) bool { return !gone(key) })
	}
}

// publish stores list (sorted by key) as the new snapshot and wakes subscribers.
func (c *Client) publish(list []Instance) {
	c.snap.Store(newSnapshot(list, c.rev))
	c.syncedOnce.Do(func() { close(c.synced) })
	c.notify()
}

func (c *Client) markSynced() { c.lastSync.Store(time.Now().UnixNano()) }

func (c *Client) setConnected(v bool) {
	if c.connected.Swap(v) != v {
		c.notify()
	}
}
