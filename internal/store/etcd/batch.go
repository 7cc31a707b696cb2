package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/registrar-dev/registrar/internal/store"
)

// Batching under load. An Apply (each part of a split one) that finds no transaction of this
// Store in flight is written at once in a transaction of its own: when idle, one change is
// one transaction, with no added delay. While a transaction is in flight, the Applies that
// arrive are queued, and when it ends they go to etcd together in the next transaction (up to
// the operation limit, MaxBatchBytes, and no key twice), so the store's round trips do not
// grow with the rate of changes: at most one transaction of a Store is in flight.
//
// Every write keeps its own guard (the revision it was planned against) and the fence guards
// the whole transaction. A transaction is all or nothing, so when a coalesced one fails on a
// guard, each of its Applies is tried again in a transaction of its own: only the Apply whose
// record moved on gets ErrConflict; the others land.
//
// The queue holds at most one entry per caller blocked in Apply (the reconcile workers), and
// one goroutine at most drains it, ending when it is empty.

// txnItem is one Apply's transaction waiting to be coalesced.
type txnItem struct {
	ctx   context.Context
	scope store.Scope
	ops   []op
	// done receives the outcome (buffered: the drainer never blocks on it).
	done chan txnResult
}

type txnResult struct {
	rev int64
	err error
}

// batcher is the queue of one Store.
type batcher struct {
	mu    sync.Mutex
	busy  bool // a transaction is in flight, or the drainer runs
	queue []*txnItem
}

// write commits the guarded writes of one scope, coalesced with others' while a transaction
// of the Store is in flight (unless Options.NoBatch).
func (s *Store) write(ctx context.Context, scope store.Scope, ops []op) (int64, error) {
	if s.opts.NoBatch {
		return s.commit(ctx, scope, ops)
	}
	b := &s.batch
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		rev, err := s.commit(ctx, scope, ops)
		s.release()
		return rev, err
	}
	it := &txnItem{ctx: ctx, scope: scope, ops: ops, done: make(chan txnResult, 1)}
	b.queue = append(b.queue, it)
	b.mu.Unlock()
	select {
	case r := <-it.done:
		return r.rev, r.err
	case <-ctx.Done():
	}
	if b.remove(it) {
		return 0, fmt.Errorf("write %d keys under %s: %w", len(ops), s.scopePrefix(scope), ctx.Err())
	}
	// Already in a transaction: its outcome (bounded by the call timeout) tells what landed.
	r := <-it.done
	return r.rev, r.err
}

// remove takes it out of the queue, unless a transaction took it already.
func (b *batcher) remove(it *txnItem) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.queue {
		if q == it {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return true
		}
	}
	return false
}

// release ends the in-flight transaction: when Applies queued meanwhile, a drainer writes
// them; otherwise the Store is idle again.
func (s *Store) release() {
	b := &s.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		return
	}
	go s.drain()
}

// drain writes the queue, one coalesced transaction at a time, until it is empty.
func (s *Store) drain() {
	for {
		batch := s.batch.take(s.opsPerTxn(), s.opts.MaxBatchBytes, s.guardKey)
		if len(batch) == 0 {
			return
		}
		s.commitBatch(batch)
	}
}

// take removes from the queue, in order, the Applies of the next transaction: at most
// maxOps writes (opsPerTxn: the operation limit less the guard's comparisons) and maxBytes
// (the first one always), no key twice, all guarded by the first one's fence (guardKey:
// with per-shard fences, Applies of other shards wait for a transaction of their own). When
// the queue is empty it marks the batcher idle and returns nothing.
func (b *batcher) take(maxOps, maxBytes int, guardKey func(store.Scope) string) []*txnItem {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		return nil
	}
	var batch []*txnItem
	rest := b.queue[:0:0]
	keys := map[string]bool{}
	nops, nbytes := 0, 0
	guard := guardKey(b.queue[0].scope)
	for _, it := range b.queue {
		size := 0
		clash := false
		for _, o := range it.ops {
			size += o.size
			clash = clash || keys[o.key]
		}
		if len(batch) > 0 && (clash || nops+len(it.ops) > maxOps || nbytes+size > maxBytes || guardKey(it.scope) != guard) {
			rest = append(rest, it)
			continue
		}
		for _, o := range it.ops {
			keys[o.key] = true
		}
		batch = append(batch, it)
		nops, nbytes = nops+len(it.ops), nbytes+size
	}
	b.queue = rest
	return batch
}

// commitBatch writes the Applies of batch in one transaction and tells each its outcome.
func (s *Store) commitBatch(batch []*txnItem) {
	if len(batch) == 1 {
		it := batch[0]
		rev, err := s.commit(it.ctx, it.scope, it.ops)
		it.done <- txnResult{rev, err}
		return
	}
	var ops []op
	for _, it := range batch {
		ops = append(ops, it.ops...)
	}
	// The transaction serves several callers: none of their contexts may cancel it alone.
	ctx := context.Background()
	rev, err := s.txn(ctx, batch[0].scope, ops, len(batch), fmt.Sprintf("%d keys of %d registries", len(ops), len(batch)))
	if errors.Is(err, store.ErrConflict) {
		// Some guard failed: only its Apply may fail. Each is tried on its own.
		for _, it := range batch {
			rev, err := s.commit(it.ctx, it.scope, it.ops)
			it.done <- txnResult{rev, err}
		}
		return
	}
	for _, it := range batch {
		it.done <- txnResult{rev, err}
	}
}
