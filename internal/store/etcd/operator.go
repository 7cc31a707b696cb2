package etcd

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
)

// WriteGuard guards every transaction of a Store: Guard returns the comparison the
// transaction carries and the read its else branch makes, Fenced tells from a failed
// transaction's response whether the guard (not a record) failed. The guards are package
// fence's: fence.Fence, one per installation (leader election), and fence.Shards, one per
// shard (--sharding=lease).
type WriteGuard interface {
	Guard(ctx context.Context, scope store.Scope) (clientv3.Cmp, clientv3.Op, error)
	// Comparisons is how many comparisons the guard adds to a transaction: etcd counts
	// them against --max-txn-ops with the writes' own, so the Store leaves room for them
	// in every transaction it sends (a split Apply's and a coalesced one's alike).
	Comparisons() int
	Fenced(scope store.Scope, resp *clientv3.TxnResponse) bool
	// GuardKey names the fence key that guards scope: writes of scopes with one key may
	// share a transaction (the batcher).
	GuardKey(scope store.Scope) string
}

var (
	_ WriteGuard = (*fence.Fence)(nil)
	_ WriteGuard = (*fence.Shards)(nil)
)

// NewOperator returns the Store the operator runs: every transaction guarded by guard (the
// installation's write fence, its cluster's fence in a shared store, or the fences of its
// shards with --sharding=lease) and, unless opts.NoBatch, coalesced under load. cmd builds
// its etcd store with it, and so do the conformance suite and the controller's tests, so
// that they exercise what runs (the guard's comparisons included). opts.Fence and
// opts.Guard are replaced by guard; a nil guard is refused: the operator never writes
// unguarded.
func NewOperator(kv clientv3.KV, guard WriteGuard, opts Options) (*Store, error) {
	if guard == nil {
		return nil, errors.New("etcd store: the operator's store needs a write guard (its fence)")
	}
	opts.Fence, opts.Guard = nil, guard
	return New(kv, opts), nil
}
