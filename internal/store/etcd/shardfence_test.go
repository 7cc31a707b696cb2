package etcd_test

import (
	"errors"
	"testing"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
)

// shardReplica is one replica's Store guarded by its ShardFences, with one shard (every
// namespace in shard 0).
func shardReplica(t *testing.T, f fixture, id string) (*etcd.Store, *fence.Shards) {
	t.Helper()
	cli := newClient(t, requireServer(t))
	fences := fence.NewShards(cli, f.prefix, "ring", id, 1, 0)
	return etcd.New(cli, etcd.Options{Prefix: f.prefix, Guard: fences}), fences
}

// alive is a member set.
func alive(members ...string) func(string) bool {
	return func(h string) bool {
		for _, m := range members {
			if m == h {
				return true
			}
		}
		return false
	}
}

// TestShardFencesHandOver walks one shard through its hand-overs with real etcd: a live
// holder keeps it, a release lets the next member take it, a holder that is no longer a
// member loses it to the next one (whose writes then go through while the old holder's are
// refused), and a shard never held refuses writes.
func TestShardFencesHandOver(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	a, fa := shardReplica(t, f, "a")
	b, fb := shardReplica(t, f, "b")

	if _, err := a.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write before any fence is held: err = %v, want ErrFenced", err)
	}
	if ok, err := fa.Acquire(ctx(t), 0, alive("a", "b")); !ok || err != nil {
		t.Fatalf("a takes a never-held fence: ok=%v err=%v", ok, err)
	}
	if _, err := a.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}}); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	if ok, err := fb.Acquire(ctx(t), 0, alive("a", "b")); ok || err != nil {
		t.Fatalf("b takes the fence of live holder a: ok=%v err=%v, want refused", ok, err)
	}
	if err := fa.Release(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if h, _ := fa.Holder(ctx(t), 0); h != "" || fa.Holds(0) {
		t.Fatalf("after release: holder %q, a holds %v", h, fa.Holds(0))
	}
	if _, err := a.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-1")}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write after release: err = %v, want ErrFenced", err)
	}
	if ok, err := fb.Acquire(ctx(t), 0, alive("a", "b")); !ok || err != nil {
		t.Fatalf("b takes a released fence: ok=%v err=%v", ok, err)
	}
	listed := f.listByPod(t, scope)
	if _, err := b.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-1")}}); err != nil {
		t.Fatalf("new holder's write: %v", err)
	}

	// b is paused past its Lease: a (no longer seeing b as a member) takes the fence; b's
	// next write is refused and b learns it lost the shard.
	if ok, err := fa.Acquire(ctx(t), 0, alive("a")); !ok || err != nil {
		t.Fatalf("a takes the fence of dead holder b: ok=%v err=%v", ok, err)
	}
	_, err := b.Apply(ctx(t), scope, store.Changes{Delete: []store.Record{listed["web-0"]}})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed holder's delete: err = %v, want ErrFenced", err)
	}
	if fb.Holds(0) {
		t.Error("b still holds the shard after a fenced write")
	}
	if got := f.listByPod(t, scope); len(got) != 2 || got["web-0"].Revision != listed["web-0"].Revision {
		t.Errorf("store = %v, want web-0 untouched and web-1", got)
	}
	// b's stale release must not empty a's fence.
	if err := fb.Release(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if h, _ := fa.Holder(ctx(t), 0); h != "a" {
		t.Errorf("holder after b's stale release = %q, want a", h)
	}
	if _, err := a.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-2")}}); err != nil {
		t.Errorf("a's write after taking over: %v", err)
	}

}

// TestShardFencesVerify: b takes the fence on a stale view (a not yet a member); a, with
// nothing to write, learns it from Verify.
func TestShardFencesVerify(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	_, fa := shardReplica(t, f, "a")
	_, fb := shardReplica(t, f, "b")
	if ok, err := fa.Acquire(ctx(t), 0, alive()); !ok || err != nil {
		t.Fatalf("a takes the fence: ok=%v err=%v", ok, err)
	}
	if ok, err := fb.Acquire(ctx(t), 0, alive()); !ok || err != nil {
		t.Fatalf("b takes the fence on a stale view: ok=%v err=%v", ok, err)
	}
	if !fa.Holds(0) {
		t.Fatal("a forgot the shard before verifying")
	}
	if err := fa.Verify(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if fa.Holds(0) || !fb.Holds(0) {
		t.Errorf("after Verify: a holds %v (want false), b holds %v (want true)", fa.Holds(0), fb.Holds(0))
	}
	if err := fb.Verify(ctx(t)); err != nil || !fb.Holds(0) {
		t.Errorf("the holder's own Verify: err %v, holds %v", err, fb.Holds(0))
	}
}
