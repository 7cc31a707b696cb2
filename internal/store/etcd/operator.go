package etcd

import (
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"
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
