package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
)

// countingKV passes every call to a real client, counts the transactions in flight (the most
// at once too) and can hold the next transaction until released.
type countingKV struct {
	clientv3.KV
	inflight, most atomic.Int32
	holdNext       atomic.Bool
	held           chan struct{} // closed when a held transaction waits
	release        chan struct{} // closed to let it go
}

func newCountingKV(kv clientv3.KV) *countingKV {
	return &countingKV{KV: kv, held: make(chan struct{}), release: make(chan struct{})}
}

func (k *countingKV) Txn(ctx context.Context) clientv3.Txn {
	return &countingTxn{Txn: k.KV.Txn(ctx), kv: k}
}

type countingTxn struct {
	clientv3.Txn
	kv *countingKV
}

func (t *countingTxn) If(c ...clientv3.Cmp) clientv3.Txn  { t.Txn = t.Txn.If(c...); return t }
func (t *countingTxn) Then(o ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(o...); return t }
func (t *countingTxn) Else(o ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(o...); return t }

func (t *countingTxn) Commit() (*clientv3.TxnResponse, error) {
	n := t.kv.inflight.Add(1)
	defer t.kv.inflight.Add(-1)
	for {
		m := t.kv.most.Load()
		if n <= m || t.kv.most.CompareAndSwap(m, n) {
			break
		}
	}
	if t.kv.holdNext.CompareAndSwap(true, false) {
		close(t.kv.held)
		<-t.kv.release
	}
	return t.Txn.Commit()
}

// txnLog records what Options.OnTxn reports.
type txnLog struct {
	mu    sync.Mutex
	items []int
}

func (l *txnLog) observe(items, _ int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, items)
}

func (l *txnLog) snapshot() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.items...)
}

// batchFixture is a fenced Store (as the operator runs it) on a countingKV, and a separate
// client to read back what landed.
func batchFixture(t *testing.T) (fixture, *etcd.Store, *countingKV, *txnLog) {
	t.Helper()
	f := newFixture(t, etcd.Options{})
	cli := newClient(t, requireServer(t))
	kv := newCountingKV(cli)
	fence := fence.New(cli, fence.Key(f.prefix, "ns"), "leader", 0)
	if err := fence.Acquire(ctx(t)); err != nil {
		t.Fatal(err)
	}
	log := &txnLog{}
	return f, etcd.New(kv, etcd.Options{Prefix: f.prefix, Fence: fence, OnTxn: log.observe}), kv, log
}

func scopeN(i int) store.Scope {
	return store.Scope{Service: fmt.Sprintf("svc-%03d", i), Namespace: "shop"}
}

func epIn(sc store.Scope, pod string) store.Endpoint {
	e := ep(pod)
	e.Service, e.Namespace = sc.Service, sc.Namespace
	return e
}

// TestBatchIdleOneTransactionPerChange: changes that arrive one at a time are written one
// transaction each, at once (the store's revision moves by one per Apply).
func TestBatchIdleOneTransactionPerChange(t *testing.T) {
	f, s, _, log := batchFixture(t)
	for i := range 20 {
		before := f.revision(t)
		if _, err := s.Apply(ctx(t), scopeN(i), store.Changes{Create: []store.Endpoint{epIn(scopeN(i), "web-0")}}); err != nil {
			t.Fatalf("Apply %d: %v", i, err)
		}
		if moved := f.revision(t) - before; moved != 1 {
			t.Fatalf("Apply %d moved the revision by %d, want 1 transaction", i, moved)
		}
	}
	if got := log.snapshot(); len(got) != 20 {
		t.Errorf("OnTxn saw %d transactions (%v), want 20 of one Apply each", len(got), got)
	}
	for _, n := range log.snapshot() {
		if n != 1 {
			t.Errorf("an idle transaction carried %d Applies, want 1", n)
		}
	}
}

// TestBatchSaturated: many writers at once. At most one transaction is in flight, so the
// transactions are fewer than the Applies, and every change lands.
func TestBatchSaturated(t *testing.T) {
	f, s, kv, log := batchFixture(t)
	const writers, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			sc := scopeN(w)
			for i := range each {
				if _, err := s.Apply(ctx(t), sc, store.Changes{Create: []store.Endpoint{epIn(sc, fmt.Sprintf("web-%02d", i))}}); err != nil {
					errs <- fmt.Errorf("writer %d apply %d: %w", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for w := range writers {
		if got := len(f.listByPod(t, scopeN(w))); got != each {
			t.Errorf("scope %d holds %d records, want %d", w, got, each)
		}
	}
	txns, items := len(log.snapshot()), 0
	for _, n := range log.snapshot() {
		items += n
	}
	t.Logf("%d Applies in %d transactions (%.1f per transaction), at most %d in flight", items, txns, float64(items)/float64(txns), kv.most.Load())
	if items != writers*each {
		t.Errorf("transactions carried %d Applies, want %d", items, writers*each)
	}
	if kv.most.Load() != 1 {
		t.Errorf("%d transactions in flight at once, want 1", kv.most.Load())
	}
	if txns >= items/2 {
		t.Errorf("%d transactions for %d Applies from %d writers at once: not coalesced", txns, items, writers)
	}
}

// holdAndQueue holds the next transaction of s (an Apply of a scope of its own) in flight
// until the returned func is called, and waits until n more Applies are queued behind it by
// start.
func holdAndQueue(t *testing.T, s *etcd.Store, kv *countingKV, n int, start func()) (release func() error) {
	t.Helper()
	kv.holdNext.Store(true)
	first := make(chan error, 1)
	go func() {
		sc := scopeN(999)
		_, err := s.Apply(ctx(t), sc, store.Changes{Create: []store.Endpoint{epIn(sc, "web-0")}})
		first <- err
	}()
	select {
	case <-kv.held:
	case <-time.After(30 * time.Second):
		t.Fatal("first transaction never sent")
	}
	start()
	deadline := time.Now().Add(30 * time.Second)
	for etcd.Queued(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Applies queued, want %d", etcd.Queued(s), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return func() error { close(kv.release); return <-first }
}

// TestBatchConflictFailsOnlyItsApply: three Applies coalesced into one transaction, one of
// them planned against a revision that moved on: it alone gets ErrConflict; the other two
// land.
func TestBatchConflictFailsOnlyItsApply(t *testing.T) {
	f, s, kv, log := batchFixture(t)
	stale := scopeN(0)
	if _, err := s.Apply(ctx(t), stale, store.Changes{Create: []store.Endpoint{epIn(stale, "web-0")}}); err != nil {
		t.Fatal(err)
	}
	old := f.listByPod(t, stale)["web-0"]
	f.put(t, old.Key, mustJSON(t, epIn(stale, "web-0"))) // someone else wrote it since

	errs := make([]error, 3)
	var wg sync.WaitGroup
	release := holdAndQueue(t, s, kv, 3, func() {
		wg.Go(func() {
			moved := epIn(stale, "web-0")
			moved.Address = "10.9.9.9"
			_, errs[0] = s.Apply(ctx(t), stale, store.Changes{Update: []store.Update{{Old: old, New: moved}}})
		})
		for i := 1; i <= 2; i++ {
			wg.Go(func() {
				_, errs[i] = s.Apply(ctx(t), scopeN(i), store.Changes{Create: []store.Endpoint{epIn(scopeN(i), "web-0")}})
			})
		}
	})
	if err := release(); err != nil {
		t.Fatalf("held Apply: %v", err)
	}
	wg.Wait()
	if !errors.Is(errs[0], store.ErrConflict) {
		t.Errorf("stale Apply: err = %v, want ErrConflict", errs[0])
	}
	for i := 1; i <= 2; i++ {
		if errs[i] != nil {
			t.Errorf("Apply %d coalesced with a stale one: %v", i, errs[i])
		}
		if got := f.listByPod(t, scopeN(i)); len(got) != 1 {
			t.Errorf("scope %d holds %v, want web-0", i, got)
		}
	}
	if got := f.listByPod(t, stale)["web-0"]; got.Address == "10.9.9.9" {
		t.Errorf("the stale update landed: %+v", got)
	}
	coalesced := false
	for _, n := range log.snapshot() {
		coalesced = coalesced || n == 3
	}
	if !coalesced {
		t.Errorf("transactions carried %v Applies, want one with all 3", log.snapshot())
	}
}

// TestBatchFencedFailsEveryApply: a coalesced transaction of a deposed leader fails every
// Apply in it with ErrFenced, and writes nothing.
func TestBatchFencedFailsEveryApply(t *testing.T) {
	f, s, kv, _ := batchFixture(t)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	release := holdAndQueue(t, s, kv, 3, func() {
		for i := range 3 {
			wg.Go(func() {
				_, errs[i] = s.Apply(ctx(t), scopeN(i), store.Changes{Create: []store.Endpoint{epIn(scopeN(i), "web-0")}})
			})
		}
	})
	// A new leader takes the fence while the queued Applies wait.
	if err := fence.New(f.raw, fence.Key(f.prefix, "ns"), "new", 0).Acquire(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := release(); !errors.Is(err, store.ErrFenced) {
		t.Errorf("held Apply: err = %v, want ErrFenced", err)
	}
	wg.Wait()
	for i := range 3 {
		if !errors.Is(errs[i], store.ErrFenced) {
			t.Errorf("Apply %d: err = %v, want ErrFenced", i, errs[i])
		}
		if got := f.listByPod(t, scopeN(i)); len(got) != 0 {
			t.Errorf("scope %d holds %v after a fenced write", i, got)
		}
	}
}

// TestBatchSameKeyNotCoalesced: two queued Applies of the same key never share a
// transaction (etcd refuses a key twice in one): both are written, in order.
func TestBatchSameKeyNotCoalesced(t *testing.T) {
	f, s, kv, log := batchFixture(t)
	sc := scopeN(0)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	release := holdAndQueue(t, s, kv, 1, func() {
		wg.Go(func() { _, errs[0] = s.Apply(ctx(t), sc, store.Changes{Create: []store.Endpoint{epIn(sc, "web-0")}}) })
	})
	// The second Apply of the same key, queued behind the first, must not join it.
	wg.Go(func() { _, errs[1] = s.Apply(ctx(t), sc, store.Changes{Create: []store.Endpoint{epIn(sc, "web-0")}}) })
	deadline := time.Now().Add(30 * time.Second)
	for etcd.Queued(s) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d Applies queued, want 2", etcd.Queued(s))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// Both creates of web-0: one lands, the other finds the key (ErrConflict): never an
	// etcd error for a duplicate key.
	landed, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			landed++
		case errors.Is(err, store.ErrConflict):
			conflicts++
		default:
			t.Errorf("Apply: %v", err)
		}
	}
	if landed != 1 || conflicts != 1 {
		t.Errorf("%d landed, %d conflicts; want 1 and 1", landed, conflicts)
	}
	if got := f.listByPod(t, sc); len(got) != 1 {
		t.Errorf("scope holds %v, want web-0", got)
	}
	for _, n := range log.snapshot() {
		if n > 1 {
			t.Errorf("a transaction carried %d Applies of the same key", n)
		}
	}
}
