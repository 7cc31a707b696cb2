package fence

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/sharding"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// Guard is the fence's etcd.WriteGuard: it waits until the fence is held.
func (f *Fence) Guard(ctx context.Context, _ store.Scope) (clientv3.Cmp, clientv3.Op, error) {
	cmp, err := f.guard(ctx)
	return cmp, clientv3.OpGet(f.key), err
}

// Comparisons is one: the fence key's revision.
func (f *Fence) Comparisons() int { return 1 }

// Fenced reports a failure on the fence, which is then lost for good.
func (f *Fence) Fenced(_ store.Scope, resp *clientv3.TxnResponse) bool { return f.check(resp) }

// GuardKey is the fence's key, whatever the scope.
func (f *Fence) GuardKey(store.Scope) string { return f.key }

// ShardKey is the fence of one shard: {prefix}/.registrar/fence/{name}/shard-{NNNN}.
func ShardKey(prefix, name string, shard int) string {
	return path.Join("/"+strings.Trim(prefix, "/"), wire.ReservedDir, "fence", name, fmt.Sprintf("shard-%04d", shard))
}

// Shards are the write fences of the shards of one installation. Each key's value is
// its holder's member name, empty once released. A replica takes a shard's fence with a
// compare-and-swap on the revision it read, only when the fence is released or its holder
// is not a live member; from then on every write to a namespace of the shard is guarded by
// the revision of that put, so a replica that lost the shard (paused past its Lease, then
// resumed) can no longer write there.
type Shards struct {
	kv       clientv3.KV
	prefix   string
	name, id string
	shards   int
	timeout  time.Duration

	mu   sync.Mutex
	revs map[int]int64 // held shard → revision of this replica's put
}

// NewShards returns the fences of shards shards of installation name, taken in the
// name of member id; timeout bounds each call.
func NewShards(kv clientv3.KV, prefix, name, id string, shards int, timeout time.Duration) *Shards {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Shards{kv: kv, prefix: prefix, name: name, id: id, shards: max(shards, 1), timeout: timeout, revs: map[int]int64{}}
}

// Key is the fence key of shard.
func (f *Shards) Key(shard int) string { return ShardKey(f.prefix, f.name, shard) }

// Holder reads who holds shard's fence ("" when released or never taken).
func (f *Shards) Holder(ctx context.Context, shard int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := f.kv.Get(ctx, f.Key(shard))
	if err != nil {
		return "", fmt.Errorf("read shard fence %s: %w", f.Key(shard), err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Acquire takes shard's fence unless a live member (alive) holds it.
func (f *Shards) Acquire(ctx context.Context, shard int, alive func(holder string) bool) (bool, error) {
	key := f.Key(shard)
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := f.kv.Get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("read shard fence %s: %w", key, err)
	}
	var modRev int64
	if len(resp.Kvs) == 1 {
		modRev = resp.Kvs[0].ModRevision
		if holder := string(resp.Kvs[0].Value); holder != "" && alive(holder) {
			return false, nil // still draining: it releases when done
		}
	}
	txn, err := f.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(clientv3.OpPut(key, f.id)).Commit()
	if err != nil {
		return false, fmt.Errorf("take shard fence %s: %w", key, err)
	}
	if !txn.Succeeded {
		return false, nil // someone else moved first: next tick
	}
	f.mu.Lock()
	f.revs[shard] = txn.Header.Revision
	f.mu.Unlock()
	return true, nil
}

// Release gives shard's fence up (empties the key if this replica's put is still the last
// one). Writes of the shard fail from now on, whatever the store answers.
func (f *Shards) Release(ctx context.Context, shard int) error {
	f.mu.Lock()
	rev, ok := f.revs[shard]
	delete(f.revs, shard)
	f.mu.Unlock()
	if !ok {
		return nil
	}
	key := f.Key(shard)
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	_, err := f.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpPut(key, "")).Commit()
	if err != nil {
		f.mu.Lock()
		f.revs[shard] = rev // still ours: release again later
		f.mu.Unlock()
		return fmt.Errorf("release shard fence %s: %w", key, err)
	}
	return nil
}

// Verify reads every shard fence of the installation (one range read) and forgets the
// shards whose fence moved on since this replica took it: another member took it (this one
// was thought dead, or took it on a stale view). A replica learns it so within a tick, even
// when it has nothing to write.
func (f *Shards) Verify(ctx context.Context) error {
	dir := ShardKey(f.prefix, f.name, 0)
	dir = dir[:strings.LastIndex(dir, "/")+1]
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := f.kv.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read shard fences %s: %w", dir, err)
	}
	current := make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		current[string(kv.Key)] = kv.ModRevision
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for shard, rev := range f.revs {
		if current[f.Key(shard)] != rev {
			delete(f.revs, shard)
		}
	}
	return nil
}

// Holds reports whether this replica holds shard's fence.
func (f *Shards) Holds(shard int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.revs[shard]
	return ok
}

// Guard is the comparison of the fence of scope's namespace's shard; ErrFenced when this
// replica does not hold it.
func (f *Shards) Guard(_ context.Context, scope store.Scope) (clientv3.Cmp, clientv3.Op, error) {
	shard := sharding.ShardOf(scope.Namespace, f.shards)
	key := f.Key(shard)
	f.mu.Lock()
	rev, ok := f.revs[shard]
	f.mu.Unlock()
	if !ok {
		return clientv3.Cmp{}, clientv3.Op{}, fmt.Errorf("shard %d of namespace %s is not this replica's: %w", shard, scope.Namespace, store.ErrFenced)
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", rev), clientv3.OpGet(key), nil
}

// Comparisons is one: the revision of the fence key of the scope's shard.
func (f *Shards) Comparisons() int { return 1 }

// GuardKey is the fence key of scope's namespace's shard.
func (f *Shards) GuardKey(scope store.Scope) string {
	return f.Key(sharding.ShardOf(scope.Namespace, f.shards))
}

// Fenced reports whether a failed transaction failed on the shard's fence; the shard is
// then lost (Holds turns false) and its Coordinator drops it.
func (f *Shards) Fenced(scope store.Scope, resp *clientv3.TxnResponse) bool {
	if len(resp.Responses) == 0 || resp.Responses[0].GetResponseRange() == nil {
		return false
	}
	shard := sharding.ShardOf(scope.Namespace, f.shards)
	kvs := resp.Responses[0].GetResponseRange().Kvs
	f.mu.Lock()
	defer f.mu.Unlock()
	rev, held := f.revs[shard]
	if held && len(kvs) == 1 && kvs[0].ModRevision == rev {
		return false
	}
	delete(f.revs, shard)
	return true
}
