// Package etcd is the etcd backend of the store: one key per endpoint at
// {prefix}/{service}/{namespace}/{pod} with one JSON value (codec.go), listed, scanned and
// watched under the prefix, and written in transactions that each carry the writer's guard
// (WriteGuard: the fences of package fence) and are split to etcd's --max-txn-ops or
// coalesced under load (batch.go). It also owns the outage handling (fail fast while the
// store is down, probe until it answers, OnRecover), the endpoint lease that lets the
// endpoints expire once every writer is gone (lease.go), and the layout several clusters
// share (cluster.go: each writer touches only its own cluster's records). How to reach etcd,
// or run it in-process, is package etcdclient's.
package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// FenceDir is the directory under the store prefix that holds registrar's own bookkeeping
// (wire.ReservedDir: the fences of package fence, the endpoint lease's record): it never
// collides with {prefix}/{serviceName}/, and List, ListAll and Watch skip it.
const FenceDir = wire.ReservedDir

// Defaults of Options.
const (
	DefaultPrefix    = wire.DefaultPrefix
	DefaultTimeout   = 5 * time.Second
	DefaultMaxTxnOps = 128 // etcd's --max-txn-ops default
)

// Options configure a Store.
type Options struct {
	// Prefix is the root of every key; DefaultPrefix when empty.
	Prefix string
	// Timeout bounds every call to etcd; DefaultTimeout when zero.
	Timeout time.Duration
	// MaxTxnOps is the largest number of operations in one transaction; changes larger
	// than this are split into several transactions. DefaultMaxTxnOps when zero.
	MaxTxnOps int
	// Fence, when set, guards every transaction: writes fail with store.ErrFenced once
	// another leader took the fence, and wait until this process has taken it.
	Fence *fence.Fence
	// Guard, when set, guards every transaction instead of Fence (fence.Shards: the fence
	// of the scope's shard).
	Guard WriteGuard
	// ProbeTimeout bounds each call while the store is known to be unreachable, so that a
	// reconcile reports the outage fast instead of waiting out Timeout every time; it is
	// also the timeout of Start's probes. DefaultProbeTimeout when zero.
	ProbeTimeout time.Duration
	// ProbeInterval is how often Start probes an unreachable store. DefaultProbeInterval
	// when zero.
	ProbeInterval time.Duration
	// OnRecover is called (from Start's goroutine or a caller's) when the store answers
	// again after an outage, e.g. to retry every registry at once instead of waiting out
	// each one's backoff.
	OnRecover func()
	// LeaseTTL, when positive, writes every endpoint with an etcd lease of this TTL that
	// the Store keeps alive (Leases must be set): if every writer is gone for longer, the
	// endpoints expire instead of lingering. Off by default: a stale list of instances
	// beats an empty one when the operator, not the instances, is down.
	LeaseTTL time.Duration
	// Leases grants and keeps alive the endpoint lease (a *clientv3.Client).
	Leases clientv3.Lease
	// LeaseKey records the lease's ID so that the next leader adopts it (see LeaseKey).
	LeaseKey string
	// OnLeaseLost is called when the endpoint lease expired while this process wrote with
	// it: its endpoints are gone from the store and must be written again.
	OnLeaseLost func()
	// Cluster, when set, is this installation's cluster ID in a prefix that several
	// clusters share (the shared layout, cluster.go): keys are {scope}{cluster}.{pod}, and
	// the Store lists, scans, watches, writes and deletes only its own cluster's records.
	// It must be a wire.ValidateClusterID label.
	Cluster string
	// NoBatch writes every Apply in transactions of its own. By default, while a transaction
	// is in flight, the Applies that arrive meanwhile (of any scopes) are coalesced into the
	// next transaction (see batch.go); an Apply that finds no transaction in flight is
	// written at once, as with NoBatch.
	NoBatch bool
	// MaxBatchBytes bounds the keys and values of one coalesced transaction (an Apply larger
	// than this alone still goes in one). DefaultMaxBatchBytes when zero; it must stay below
	// etcd's --max-request-bytes (1.5 MiB by default).
	MaxBatchBytes int
	// OnTxn, when set, is called after every transaction sent to etcd with the number of
	// Applies (or parts of a split Apply) it carried and its writes: a metric's source.
	OnTxn func(items, ops int)
}

// DefaultMaxBatchBytes is the default of Options.MaxBatchBytes.
const DefaultMaxBatchBytes = 512 << 10

// Defaults of the outage handling.
const (
	DefaultProbeTimeout  = time.Second
	DefaultProbeInterval = time.Second
)

// Store writes endpoints to etcd.
type Store struct {
	kv       clientv3.KV
	opts     Options
	health   health
	backstop *backstop
	batch    batcher
}

var _ store.Store = (*Store)(nil)

// New returns a Store using kv (a *clientv3.Client or a namespaced KV).
func New(kv clientv3.KV, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	// Cleaned, so that every key and scope prefix starts with it literally ("a/../b" is "/b").
	opts.Prefix = wire.Prefix(opts.Prefix)
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = DefaultMaxTxnOps
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = min(DefaultProbeTimeout, opts.Timeout)
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = DefaultMaxBatchBytes
	}
	s := &Store{kv: kv, opts: opts, health: health{wake: make(chan struct{}, 1)}}
	if opts.LeaseTTL > 0 && opts.Leases != nil {
		s.backstop = &backstop{kv: kv, key: opts.LeaseKey, leases: opts.Leases, ttl: opts.LeaseTTL, lost: opts.OnLeaseLost}
		if s.backstop.key == "" && opts.Cluster != "" {
			s.backstop.key = wire.ClusterLeaseKey(opts.Prefix, opts.Cluster)
		}
		if s.backstop.key == "" {
			s.backstop.key = LeaseKey(opts.Prefix, "default")
		}
	}
	return s
}

// Key is the store key of pod in scope.
func (s *Store) Key(scope store.Scope, pod string) string {
	return keyFor(s.opts.Prefix, scope, s.podSegment(pod))
}

func (s *Store) scopePrefix(scope store.Scope) string {
	return wire.ScopePrefix(s.opts.Prefix, scope.Service, scope.Namespace)
}

// List returns every record under {prefix}/{service}/{namespace}/.
func (s *Store) List(ctx context.Context, scope store.Scope) ([]store.Record, error) {
	if err := checkScope(scope); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	prefix := s.listPrefix(scope)
	resp, err := s.kv.Get(ctx, prefix, clientv3.WithPrefix())
	s.observe(ctx, err)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	records := make([]store.Record, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		rec := decodeRecord(prefix, kv.Key, kv.Value, kv.ModRevision)
		s.disownForeign(&rec)
		records = append(records, rec)
	}
	return records, nil
}

// op is one guarded write of a transaction.
type op struct {
	cmp clientv3.Cmp
	op  clientv3.Op
	put *store.Endpoint
	// key is the written key; size the bytes of its key and value (batch bounds).
	key  string
	size int
}

// Apply writes changes in as few transactions as etcd's operation limit allows. Every
// operation is guarded by the revision it was planned against, so a concurrent writer
// (another registrar, or a deposed leader) makes the transaction fail with ErrConflict.
func (s *Store) Apply(ctx context.Context, scope store.Scope, changes store.Changes) ([]store.Record, error) {
	var lease clientv3.LeaseID
	if s.backstop != nil && len(changes.Create)+len(changes.Update) > 0 {
		lctx, cancel := context.WithTimeout(ctx, s.callTimeout())
		var err error
		lease, err = s.backstop.lease(lctx)
		s.observe(lctx, err)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	ops, err := s.ops(scope, changes, lease)
	if err != nil {
		return nil, err
	}
	written := make([]store.Record, 0, len(changes.Create)+len(changes.Update))
	per := s.opsPerTxn()
	for start := 0; start < len(ops); start += per {
		batch := ops[start:min(start+per, len(ops))]
		rev, err := s.write(ctx, scope, batch)
		if err != nil {
			return written, err
		}
		for _, o := range batch {
			if o.put != nil {
				written = append(written, store.Record{Endpoint: *o.put, Key: s.Key(scope, o.put.Pod), Revision: rev})
			}
		}
	}
	return written, nil
}

// opsPerTxn is how many guarded writes fit in one transaction: etcd counts comparisons
// against --max-txn-ops too (the larger of the comparisons and the writes), each write
// carries one, and the write guard (Options.Guard or Options.Fence, whichever guards the
// Store) adds its own, as many as it says. Every transaction the Store sends, a part of a
// split Apply or a coalesced one, holds at most this many writes.
func (s *Store) opsPerTxn() int {
	n := s.opts.MaxTxnOps
	if g := s.writeGuard(); g != nil {
		n -= g.Comparisons()
	}
	return max(n, 1)
}

func (s *Store) ops(scope store.Scope, c store.Changes, lease clientv3.LeaseID) ([]op, error) {
	if err := checkScope(scope); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	if err := s.checkClusters(scope, c); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	ops := make([]op, 0, c.Len())
	for i := range c.Delete {
		if err := checkSegment("pod", c.Delete[i].Pod); err != nil {
			return nil, fmt.Errorf("delete: %w", err)
		}
		key := s.Key(scope, c.Delete[i].Pod)
		ops = append(ops, op{
			cmp: clientv3.Compare(clientv3.ModRevision(key), "=", c.Delete[i].Revision),
			op:  clientv3.OpDelete(key),
			key: key, size: len(key),
		})
	}
	for i := range c.Create {
		o, err := s.putOp(scope, &c.Create[i], clientv3.Compare(clientv3.CreateRevision(s.Key(scope, c.Create[i].Pod)), "=", 0), lease)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o)
	}
	for i := range c.Update {
		u := &c.Update[i]
		o, err := s.putOp(scope, &u.New, clientv3.Compare(clientv3.ModRevision(s.Key(scope, u.New.Pod)), "=", u.Old.Revision), lease)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o)
	}
	return ops, nil
}

func (s *Store) putOp(scope store.Scope, ep *store.Endpoint, guard clientv3.Cmp, lease clientv3.LeaseID) (op, error) {
	if err := checkSegment("pod", ep.Pod); err != nil {
		return op{}, fmt.Errorf("write: %w", err)
	}
	key := s.Key(scope, ep.Pod)
	value, err := encodeValue(ep)
	if err != nil {
		return op{}, fmt.Errorf("encode %s: %w", key, err)
	}
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(lease))
	}
	return op{cmp: guard, op: clientv3.OpPut(key, string(value), opts...), put: ep, key: key, size: len(key) + len(value)}, nil
}

// commit runs one guarded transaction of one scope's writes and returns the revision it
// created.
func (s *Store) commit(ctx context.Context, scope store.Scope, batch []op) (int64, error) {
	return s.txn(ctx, scope, batch, 1, fmt.Sprintf("%d keys under %s", len(batch), s.scopePrefix(scope)))
}

// txn runs one guarded transaction of the writes of items Applies (what names them for
// errors) and returns the revision it created. Every Apply in it is guarded by the same
// fence, scope's (batcher.take groups them by guardKey).
func (s *Store) txn(ctx context.Context, scope store.Scope, batch []op, items int, what string) (int64, error) {
	cmps := make([]clientv3.Cmp, 0, len(batch)+1)
	thens := make([]clientv3.Op, len(batch))
	for i, o := range batch {
		cmps, thens[i] = append(cmps, o.cmp), o.op
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout()) // also bounds the wait for the fence
	defer cancel()
	var elses []clientv3.Op
	g := s.writeGuard()
	if g != nil {
		guard, read, err := g.Guard(ctx, scope)
		if err != nil {
			return 0, fmt.Errorf("write %s: %w", what, err)
		}
		cmps, elses = append(cmps, guard), []clientv3.Op{read}
	}
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(thens...).Else(elses...).Commit()
	s.observe(ctx, err)
	if s.opts.OnTxn != nil {
		s.opts.OnTxn(items, len(batch))
	}
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", what, err)
	}
	if !resp.Succeeded {
		if g != nil && g.Fenced(scope, resp) {
			return 0, fmt.Errorf("write %s: %w", what, store.ErrFenced)
		}
		return 0, fmt.Errorf("write %s: %w", what, store.ErrConflict)
	}
	return resp.Header.Revision, nil
}

// guardKey names the fence that guards scope's writes ("" without one): Applies coalesced
// into one transaction must share it, the transaction carrying its comparisons once.
func (s *Store) guardKey(scope store.Scope) string {
	if g := s.writeGuard(); g != nil {
		return g.GuardKey(scope)
	}
	return ""
}

// writeGuard is Options.Guard, else Options.Fence, else nil.
func (s *Store) writeGuard() WriteGuard {
	if s.opts.Guard != nil {
		return s.opts.Guard
	}
	if s.opts.Fence != nil {
		return s.opts.Fence
	}
	return nil
}
