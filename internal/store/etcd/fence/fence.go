// Package fence holds the write fences of the etcd store: the revision every transaction
// of an etcd.Store compares (through etcd.WriteGuard) so that a writer that lost its
// right to write — a deposed leader still running, a replica that lost a shard, a second
// installation given the same cluster ID — fails with store.ErrFenced or
// store.ErrClusterClaimed instead of undoing the current writer's records. It owns the
// fence of one installation (Fence: taken by the leader before it writes), the cluster
// fence of a prefix several clusters share (NewCluster: claimed per installation, with the
// layout marker, CheckLayout), and the per-shard fences of --sharding=lease (Shards), and
// their keys under {prefix}/.registrar/fence/. It writes no record: the Store carries the
// guard in its transactions and asks the fence whether a failure was the fence's.
package fence

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// DefaultTimeout bounds each attempt to take a fence when none is given (the store's own
// default, etcd.DefaultTimeout).
const DefaultTimeout = 5 * time.Second

// Key is the key of the write fence of one installation, named e.g. after the
// namespace of its leader election: {prefix}/.registrar/fence/{name}.
func Key(prefix, name string) string {
	return path.Join("/"+strings.Trim(prefix, "/"), wire.ReservedDir, "fence", name)
}

// Fence guards every write of an etcd.Store with the revision at which this process took the
// fence key. A new leader takes the fence (an unconditional put) before it writes, so the
// transactions of a deposed leader that still runs (paused, then resumed) fail with
// store.ErrFenced instead of undoing the new leader's writes.
type Fence struct {
	kv      clientv3.KV
	key, id string
	timeout time.Duration

	held     chan struct{}
	lost     chan struct{}
	heldOnce sync.Once
	lostOnce sync.Once
	mu       sync.Mutex
	rev      int64

	// installation, layoutKey and cluster are set on a cluster fence (NewCluster);
	// claimErr is why it cannot be taken.
	installation, layoutKey, cluster string
	claimErr                         error
}

// New returns a fence on key, taken in the name of id (written as its value, for
// people looking at the store). timeout bounds each attempt to take it.
func New(kv clientv3.KV, key, id string, timeout time.Duration) *Fence {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Fence{kv: kv, key: key, id: id, timeout: timeout, held: make(chan struct{}), lost: make(chan struct{})}
}

// Key is the fence's store key.
func (f *Fence) Key() string { return f.key }

// Acquire takes the fence: every writer that took it before now fails its next write.
func (f *Fence) Acquire(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	var rev int64
	if f.installation != "" {
		var err error
		if rev, err = f.claim(ctx); err != nil {
			return err
		}
	} else {
		resp, err := f.kv.Put(ctx, f.key, f.id)
		if err != nil {
			return fmt.Errorf("take write fence %s: %w", f.key, err)
		}
		rev = resp.Header.Revision
	}
	f.mu.Lock()
	f.rev = rev
	f.mu.Unlock()
	f.heldOnce.Do(func() { close(f.held) })
	return nil
}

// Start takes the fence, retrying with jittered backoff while the store is unreachable,
// then holds it until ctx ends. It is a manager Runnable that needs leader election, so a
// replica takes the fence only once it leads.
func (f *Fence) Start(ctx context.Context) error {
	delay := 200 * time.Millisecond
	for {
		err := f.Acquire(ctx)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))):
		}
		delay = min(2*delay, 10*time.Second)
	}
	<-ctx.Done()
	return nil
}

// Held is closed once the fence has been taken.
func (f *Fence) Held() <-chan struct{} { return f.held }

// Lost is closed when a write found the fence taken by someone else: this process is no
// longer the leader and must stop.
func (f *Fence) Lost() <-chan struct{} { return f.lost }

// guard waits until the fence is held and returns the comparison every transaction carries.
func (f *Fence) guard(ctx context.Context) (clientv3.Cmp, error) {
	select {
	case <-f.lost:
		return clientv3.Cmp{}, fmt.Errorf("write fence %s: %w", f.key, store.ErrFenced)
	case <-f.held:
	default:
		// Not taken yet: a cluster fence that another installation claims fails at once.
		if err := f.Claimed(); err != nil {
			return clientv3.Cmp{}, err
		}
		select {
		case <-f.lost:
			return clientv3.Cmp{}, fmt.Errorf("write fence %s: %w", f.key, store.ErrFenced)
		case <-f.held:
		case <-ctx.Done():
			if err := f.Claimed(); err != nil {
				return clientv3.Cmp{}, err
			}
			return clientv3.Cmp{}, fmt.Errorf("wait for write fence %s: %w", f.key, ctx.Err())
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return clientv3.Compare(clientv3.ModRevision(f.key), "=", f.rev), nil
}

// check tells whether a failed transaction failed on the fence, from the fence key as the
// transaction's else branch read it; if so the fence is lost for good.
func (f *Fence) check(resp *clientv3.TxnResponse) bool {
	if len(resp.Responses) == 0 || resp.Responses[0].GetResponseRange() == nil {
		return false
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	f.mu.Lock()
	ours := len(kvs) == 1 && kvs[0].ModRevision == f.rev
	f.mu.Unlock()
	if ours {
		return false
	}
	f.lostOnce.Do(func() { close(f.lost) })
	return true
}
