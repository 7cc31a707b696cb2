package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// fencedStore is a Store of the fixture's prefix whose writes carry a fence on key.
func fencedStore(t *testing.T, f fixture, key, id string) (*etcd.Store, *fence.Fence) {
	t.Helper()
	cli := newClient(t, requireServer(t))
	fence := fence.New(cli, key, id, 0)
	return etcd.New(cli, etcd.Options{Prefix: f.prefix, Fence: fence}), fence
}

func TestFenceDeposedLeaderCannotWrite(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	key := fence.Key(f.prefix, "ns")
	old, oldFence := fencedStore(t, f, key, "old")
	if err := oldFence.Acquire(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}}); err != nil {
		t.Fatalf("leader's write: %v", err)
	}
	listed := f.listByPod(t, scope)

	// A new leader takes the fence and writes; the old one, resumed, tries to undo it.
	next, nextFence := fencedStore(t, f, key, "new")
	if err := nextFence.Acquire(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-1")}}); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	_, err := old.Apply(ctx(t), scope, store.Changes{Delete: []store.Record{listed["web-0"]}, Create: []store.Endpoint{ep("web-2")}})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed leader's write: err = %v, want ErrFenced", err)
	}
	select {
	case <-oldFence.Lost():
	default:
		t.Error("Lost() not closed after a fenced write")
	}
	if got := f.listByPod(t, scope); len(got) != 2 || got["web-0"].Revision != listed["web-0"].Revision {
		t.Errorf("store after the deposed write = %v, want web-0 (untouched) and web-1", got)
	}
	// Once lost, the fence refuses without asking the store.
	if _, err := old.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-3")}}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("second deposed write: err = %v, want ErrFenced", err)
	}
	if v, _, _ := f.get(t, key); v != "new" {
		t.Errorf("fence value = %q, want the new leader's id", v)
	}
}

func TestFenceConflictIsNotFenced(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	s, fence := fencedStore(t, f, fence.Key(f.prefix, "ns"), "me")
	if err := fence.Acquire(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}})
	if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrFenced) {
		t.Fatalf("create of an existing key: err = %v, want ErrConflict only", err)
	}
	select {
	case <-fence.Lost():
		t.Error("a conflict lost the fence")
	default:
	}
}

func TestFenceWritesWaitUntilHeld(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	cli := newClient(t, requireServer(t))
	fence := fence.New(cli, fence.Key(f.prefix, "ns"), "me", 0)
	s := etcd.New(cli, etcd.Options{Prefix: f.prefix, Fence: fence, Timeout: 300 * time.Millisecond})
	done := make(chan error, 1)
	go func() { // no deadline of its own: the store's Timeout bounds the wait for the fence
		_, err := s.Apply(context.Background(), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("write before the fence was taken succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write waited for the fence beyond the store's Timeout")
	}
	if keys := f.keys(t); len(keys) != 0 {
		t.Errorf("keys written before the fence was taken: %v", keys)
	}
	go func() { _ = fence.Start(ctx(t)) }()
	<-fence.Held()
	if _, err := s.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}}); err != nil {
		t.Fatalf("write once the fence is held: %v", err)
	}
}

// TestOutageFailsFastAndRecovers uses a dedicated server: after the first call finds the
// store down, calls fail within ProbeTimeout, and Start notices the store's return.
func TestOutageFailsFastAndRecovers(t *testing.T) {
	const outage = 5 * time.Second
	requireServer(t)
	srv, err := etcdtest.Start(t.TempDir())
	if srv != nil {
		t.Cleanup(srv.Stop)
	}
	if err != nil {
		t.Fatalf("start dedicated etcd: %v", err)
	}
	var recovered atomic.Int32
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{srv.Endpoint()}}) // the operator's client
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	s := etcd.New(cli, etcd.Options{
		Prefix: "/t/" + t.Name(), Timeout: 3 * time.Second, ProbeTimeout: 300 * time.Millisecond,
		ProbeInterval: 200 * time.Millisecond, OnRecover: func() { recovered.Add(1) },
	})
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = s.Start(runCtx) }()
	if _, err := s.List(ctx(t), scope); err != nil || s.Down() {
		t.Fatalf("List against a running server: %v (down %v)", err, s.Down())
	}

	srv.Stop()
	if _, err := s.List(ctx(t), scope); err == nil {
		t.Fatal("List against a stopped server succeeded")
	}
	time.Sleep(outage) // the client's reconnect backoff grows meanwhile: scenario, not synchronisation
	if !s.Down() {
		t.Fatal("store not marked down after a failed call")
	}
	start := time.Now()
	if _, err := s.List(ctx(t), scope); err == nil {
		t.Fatal("List against a stopped server succeeded")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a call while down took %s, want about ProbeTimeout (300ms), not Timeout (3s)", took)
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.Down() || recovered.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Start did not notice the store's return: down %v, OnRecover calls %d", s.Down(), recovered.Load())
		}
		time.Sleep(50 * time.Millisecond) // polling an outcome with a deadline
	}
	if _, err := s.List(ctx(t), scope); err != nil {
		t.Fatalf("List after recovery: %v", err)
	}
}

// TestFencedApplyOfMaxTxnOps: a fenced Store writes a change of exactly MaxTxnOps keys. The
// fence is one more comparison in each transaction, and etcd counts comparisons against its
// --max-txn-ops (128 by default) too.
func TestFencedApplyOfMaxTxnOps(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	s, fence := fencedStore(t, f, fence.Key(f.prefix, "ns"), "leader")
	if err := fence.Acquire(ctx(t)); err != nil {
		t.Fatal(err)
	}
	var c store.Changes
	for i := range etcd.DefaultMaxTxnOps {
		c.Create = append(c.Create, ep(fmt.Sprintf("web-%03d", i)))
	}
	if _, err := s.Apply(ctx(t), scope, c); err != nil {
		t.Fatalf("Apply of %d creates under a fence: %v", c.Len(), err)
	}
	if got := len(f.listByPod(t, scope)); got != etcd.DefaultMaxTxnOps {
		t.Errorf("stored %d records, want %d", got, etcd.DefaultMaxTxnOps)
	}
}
