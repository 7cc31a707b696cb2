// Package remote follows, read-only, the records other clusters publish into a shared etcd
// prefix (--store-shared, docs/multicluster.md) and hands each changed registration
// (service and namespace) to a Sink: the xDS server, which serves them at priority 1 next to
// this cluster's endpoints (internal/xds/locality).
//
// It lists the prefix once (Get), then watches it from the listed revision; a watch that
// falls behind a compaction, is cancelled or breaks lists again (with backoff) and hands over
// only what changed. It never writes: its Store interface has no write method. It keeps at
// most MaxRegistrations registrations and MaxRecords records; records beyond are left out
// and logged, and come in, in key order, as soon as deletions make room: the follower
// remembers up to MaxRecords refused records (following their changes on the watch), and
// lists again to find those it could not remember once the remembered ones are served.
package remote

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/backoff"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// Defaults of Config.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxRegistrations = 4096
	DefaultMaxRecords       = 10000
)

// Record is one instance another cluster published: its key's cluster and its value.
type Record struct {
	Cluster  string
	Endpoint wire.Endpoint
}

// Registration names the records of one service in one namespace.
type Registration struct{ Service, Namespace string }

// Sink receives the full set of other clusters' records of a registration each time it
// changes (nil when it has none left). It is called from one goroutine and must not block
// for long.
type Sink interface {
	SetRemote(service, namespace string, recs []Record)
}

// Store is what the follower uses of an etcd client (*clientv3.Client): reads only.
type Store interface {
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan
}

// Config configures a Follower.
type Config struct {
	Store Store
	// Prefix is the shared store prefix (--store-prefix).
	Prefix string
	// Cluster is this cluster's ID: its own records are skipped (the xDS server has them
	// from the reconciles).
	Cluster string
	Sink    Sink
	// Timeout bounds each listing (default DefaultTimeout).
	Timeout time.Duration
	// MaxRegistrations and MaxRecords bound what is served (defaults DefaultMaxRegistrations,
	// DefaultMaxRecords). Up to MaxRecords more records, refused at these bounds, are kept
	// aside to be served when deletions make room.
	MaxRegistrations, MaxRecords int
	// RetryBase and RetryMax bound the backoff between failed listings (default 200 ms, 30 s).
	RetryBase, RetryMax time.Duration
	Log                 logr.Logger
}

// Follower is a controller-runtime Runnable that follows other clusters' records.
type Follower struct {
	cfg    Config
	prefix string // "{prefix}/"
	// state: registration → key → record; count is the number of records.
	regs    map[Registration]map[string]entry
	count   int
	refused int // records left out since the last log line (bounds)
	// waiting are records refused at the bounds, at most MaxRecords, kept up to date by the
	// watch; forgot is set when more were refused since the last listing. freed is set when
	// a record was dropped since the waiting ones were last looked at.
	waiting map[string]waiter
	forgot  bool
	freed   bool
	synced  chan struct{}
}

type waiter struct {
	reg Registration
	e   entry
}

type entry struct {
	rec Record
	rev int64 // ModRevision: an unchanged key is not handed over again
}

// New builds a follower; nothing happens before Start.
func New(cfg Config) *Follower {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRegistrations <= 0 {
		cfg.MaxRegistrations = DefaultMaxRegistrations
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = DefaultMaxRecords
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 200 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Second
	}
	return &Follower{
		cfg:     cfg,
		prefix:  wire.Prefix(cfg.Prefix) + "/",
		regs:    map[Registration]map[string]entry{},
		waiting: map[string]waiter{},
		synced:  make(chan struct{}),
	}
}

// SetSink sets Config.Sink; call it before Start (the xDS server that takes the records
// waits for Synced, so it is built after the follower).
func (f *Follower) SetSink(s Sink) { f.cfg.Sink = s }

// NeedLeaderElection: only the leader serves xDS, so only it follows.
func (f *Follower) NeedLeaderElection() bool { return true }

// Synced is closed after the first complete listing was handed over.
func (f *Follower) Synced() <-chan struct{} { return f.synced }

// Start lists and watches until ctx is done.
func (f *Follower) Start(ctx context.Context) error {
	log := f.cfg.Log
	failures := 0
	for {
		rev, err := f.list(ctx)
		if err == nil {
			failures = 0
			err = f.watch(ctx, rev)
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errRoom) {
			continue // bounded: at most once per MaxRecords refusals served or gone
		}
		if err != nil {
			failures++
		}
		wait := backoff.Delay(f.cfg.RetryBase, f.cfg.RetryMax, 0.2, max(failures-1, 0), rand.Float64()) //nolint:gosec // jitter
		log.Info("following other clusters' records again", "reason", errString(err), "after", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "watch ended"
	}
	return err.Error()
}

// list reads the whole prefix and hands over every registration that changed; it returns
// the listing's revision.
func (f *Follower) list(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	resp, err := f.cfg.Store.Get(lctx, f.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("list other clusters' records under %s: %w", f.prefix, err)
	}
	old := f.regs
	f.regs, f.count, f.refused = map[Registration]map[string]entry{}, 0, 0
	f.waiting, f.forgot, f.freed = map[string]waiter{}, false, false
	for _, kv := range resp.Kvs {
		f.put(string(kv.Key), kv.Value, kv.ModRevision)
	}
	changed := map[Registration]bool{}
	for r, keys := range old {
		if !sameKeys(keys, f.regs[r]) {
			changed[r] = true
		}
	}
	for r, keys := range f.regs {
		if !sameKeys(old[r], keys) {
			changed[r] = true
		}
	}
	f.handOver(changed)
	f.cfg.Log.V(1).Info("listed other clusters' records", "registrations", len(f.regs), "records", f.count,
		"revision", resp.Header.Revision)
	f.logRefused()
	select {
	case <-f.synced:
	default:
		close(f.synced)
	}
	return resp.Header.Revision, nil
}

func sameKeys(a, b map[string]entry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, e := range a {
		if o, ok := b[k]; !ok || o.rev != e.rev {
			return false
		}
	}
	return true
}

// errCompacted means the watch's revision was compacted away: list again at once.
var errCompacted = errors.New("watch revision compacted")

// errRoom means deletions made room for refused records the follower did not remember:
// list again at once to find them.
var errRoom = errors.New("room for refused records the follower did not remember")

// watch follows the prefix from rev+1 until ctx is done, the watch breaks (error) or it
// falls behind a compaction.
func (f *Follower) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := f.cfg.Store.Watch(wctx, f.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for resp := range ch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			f.cfg.Log.Info("other clusters' records: watch behind a compaction; listing again",
				"revision", rev, "compactRevision", resp.CompactRevision)
			return errCompacted
		}
		if err := resp.Err(); err != nil {
			return fmt.Errorf("watch other clusters' records: %w", err)
		}
		if resp.Canceled {
			return errors.New("watch of other clusters' records cancelled")
		}
		changed := map[Registration]bool{}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			if ev.Type == mvccpb.DELETE {
				if r, ok := f.remove(key); ok {
					changed[r] = true
				}
				continue
			}
			if r, ok := f.put(key, ev.Kv.Value, ev.Kv.ModRevision); ok {
				changed[r] = true
			}
		}
		f.admitWaiting(changed)
		f.handOver(changed)
		f.logRefused()
		if f.freed && f.forgot && len(f.waiting) == 0 {
			f.cfg.Log.Info("other clusters' records: room for refused records not remembered; listing again",
				"registrations", len(f.regs), "records", f.count)
			return errRoom
		}
		f.freed = false
	}
	return ctx.Err()
}

// admitWaiting serves, in key order, the waiting records that fit, once a record was
// dropped; it adds their registrations to changed.
func (f *Follower) admitWaiting(changed map[Registration]bool) {
	if !f.freed || len(f.waiting) == 0 || f.count >= f.cfg.MaxRecords {
		return
	}
	keys := make([]string, 0, len(f.waiting))
	for k := range f.waiting {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if f.count >= f.cfg.MaxRecords {
			break
		}
		w := f.waiting[k]
		if f.fits(w.reg) {
			f.add(w.reg, k, w.e)
			changed[w.reg] = true
		}
	}
}

// fits reports whether a new record of registration r is within the bounds.
func (f *Follower) fits(r Registration) bool {
	return f.count < f.cfg.MaxRecords && (f.regs[r] != nil || len(f.regs) < f.cfg.MaxRegistrations)
}

// add serves a new record.
func (f *Follower) add(r Registration, key string, e entry) {
	keys := f.regs[r]
	if keys == nil {
		keys = map[string]entry{}
		f.regs[r] = keys
	}
	keys[key] = e
	f.count++
	delete(f.waiting, key)
}

// refuse leaves a record out at the bounds, remembering it while there is room.
func (f *Follower) refuse(r Registration, key string, e entry) {
	f.refused++
	if _, ok := f.waiting[key]; ok || len(f.waiting) < f.cfg.MaxRecords {
		f.waiting[key] = waiter{reg: r, e: e}
		return
	}
	f.forgot = true
}

// parse reads a key of another cluster's instance: {prefix}{service}/{namespace}/{cluster}.{pod}.
func (f *Follower) parse(key string) (Registration, string, bool) {
	rest, ok := strings.CutPrefix(key, f.prefix)
	if !ok || strings.HasPrefix(rest, wire.ReservedDir+"/") {
		return Registration{}, "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return Registration{}, "", false
	}
	cluster, _, ok := wire.SplitClusterPod(parts[2])
	if !ok || cluster == f.cfg.Cluster {
		return Registration{}, "", false
	}
	return Registration{Service: parts[0], Namespace: parts[1]}, cluster, true
}

// put records (or, when it is no longer one of another cluster's instances, forgets) a key;
// it reports the registration when its set changed.
func (f *Follower) put(key string, value []byte, rev int64) (Registration, bool) {
	r, cluster, ok := f.parse(key)
	if !ok {
		return r, false
	}
	ep, err := wire.Decode(value)
	if err != nil || ep.Cluster != cluster {
		// Not a record of the key's cluster (nobody's, docs/multicluster.md): not served.
		f.cfg.Log.V(1).Info("other cluster's key skipped: value unreadable or naming another cluster", "key", key)
		return f.remove(key)
	}
	e := entry{rec: Record{Cluster: cluster, Endpoint: ep}, rev: rev}
	if keys := f.regs[r]; keys != nil {
		if _, had := keys[key]; had {
			keys[key] = e
			return r, true
		}
	}
	if !f.fits(r) {
		f.refuse(r, key, e)
		return r, false
	}
	f.add(r, key, e)
	return r, true
}

func (f *Follower) remove(key string) (Registration, bool) {
	r, _, ok := f.parse(key)
	if !ok {
		return r, false
	}
	delete(f.waiting, key)
	keys := f.regs[r]
	if _, had := keys[key]; !had {
		return r, false
	}
	delete(keys, key)
	f.count--
	f.freed = true
	if len(keys) == 0 {
		delete(f.regs, r)
	}
	return r, true
}

// handOver gives the sink the new set of each changed registration, in key order.
func (f *Follower) handOver(changed map[Registration]bool) {
	regs := make([]Registration, 0, len(changed))
	for r := range changed {
		regs = append(regs, r)
	}
	sort.Slice(regs, func(i, j int) bool {
		if regs[i].Service != regs[j].Service {
			return regs[i].Service < regs[j].Service
		}
		return regs[i].Namespace < regs[j].Namespace
	})
	for _, r := range regs {
		keys := f.regs[r]
		if len(keys) == 0 {
			f.cfg.Sink.SetRemote(r.Service, r.Namespace, nil)
			continue
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		recs := make([]Record, len(names))
		for i, k := range names {
			recs[i] = keys[k].rec
		}
		f.cfg.Sink.SetRemote(r.Service, r.Namespace, recs)
	}
}

func (f *Follower) logRefused() {
	if f.refused == 0 {
		return
	}
	f.cfg.Log.Info("other clusters' records beyond the follower's bounds are not served over xDS until deletions make room",
		"refused", f.refused, "maxRegistrations", f.cfg.MaxRegistrations, "maxRecords", f.cfg.MaxRecords,
		"registrations", len(f.regs), "records", f.count, "waiting", len(f.waiting), "forgotten", f.forgot)
	f.refused = 0
}
