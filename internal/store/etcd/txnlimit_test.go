package etcd_test

import (
	"fmt"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
)

// Issue 34, defect 1: etcd counts comparisons against --max-txn-ops (128 by default), and
// the operator's store carries its guard's comparison in every transaction. A change of one
// service of any size, in one Apply, lands; so does a coalesced transaction of exactly
// MaxTxnOps writes.

// stored counts the keys of sc under f's prefix, read with the fixture's raw client.
func (f fixture) stored(t *testing.T, sc store.Scope) int64 {
	t.Helper()
	resp, err := f.raw.Get(ctx(t), f.prefix+"/"+sc.Service+"/"+sc.Namespace+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("raw count: %v", err)
	}
	return resp.Count
}

func endpoints(sc store.Scope, n int) []store.Endpoint {
	eps := make([]store.Endpoint, 0, n)
	for i := range n {
		e := epIn(sc, fmt.Sprintf("web-%04d", i))
		e.Address = fmt.Sprintf("10.3.%d.%d", i/250, i%250+1)
		eps = append(eps, e)
	}
	return eps
}

// TestOperatorStoreWritesAnyServiceSize: one Apply of n creates, then one of n deletes, by
// the store as the operator builds it, around the operation limit and far beyond it.
func TestOperatorStoreWritesAnyServiceSize(t *testing.T) {
	for name, guard := range map[string]guardKind{"Fence": fenceGuard, "ShardFences": shardGuard} {
		for _, n := range []int{127, 128, 129, 150, 2000} {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				f := operatorFixture(t, guard)
				eps := endpoints(scope, n)
				written, err := f.store.Apply(ctx(t), scope, store.Changes{Create: eps})
				if err != nil {
					t.Fatalf("Apply of %d creates: %v", n, err)
				}
				if len(written) != n {
					t.Errorf("Apply returned %d records, want %d", len(written), n)
				}
				if got := f.stored(t, scope); got != int64(n) {
					t.Fatalf("etcd holds %d keys, want %d", got, n)
				}
				recs, err := f.store.List(ctx(t), scope)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.store.Apply(ctx(t), scope, store.Changes{Delete: recs}); err != nil {
					t.Fatalf("Apply of %d deletes: %v", len(recs), err)
				}
				if got := f.stored(t, scope); got != 0 {
					t.Errorf("etcd holds %d keys after deleting all %d", got, n)
				}
			})
		}
	}
}

// TestBatchOfExactlyMaxTxnOps: Applies queued behind a transaction in flight, together
// exactly DefaultMaxTxnOps writes, are coalesced with the guard's comparison counted: every
// one of them lands.
func TestBatchOfExactlyMaxTxnOps(t *testing.T) {
	for _, tc := range []struct {
		name         string
		applies, per int
	}{
		{"2x64", 2, etcd.DefaultMaxTxnOps / 2},
		{"128x1", etcd.DefaultMaxTxnOps, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, etcd.Options{})
			cli := newClient(t, requireServer(t))
			kv := newCountingKV(cli)
			log := &txnLog{}
			s, err := etcd.NewOperator(kv, fenceGuard(t, f), etcd.Options{Prefix: f.prefix, OnTxn: log.observe})
			if err != nil {
				t.Fatal(err)
			}
			errs := make([]error, tc.applies)
			var wg sync.WaitGroup
			release := holdAndQueue(t, s, kv, tc.applies, func() {
				for i := range tc.applies {
					wg.Go(func() {
						sc := scopeN(i)
						_, errs[i] = s.Apply(ctx(t), sc, store.Changes{Create: endpoints(sc, tc.per)})
					})
				}
			})
			if err := release(); err != nil {
				t.Fatalf("held Apply: %v", err)
			}
			wg.Wait()
			failed, missing := 0, 0
			for i, err := range errs {
				if err != nil {
					if failed++; failed == 1 {
						t.Errorf("Apply %d: %v", i, err)
					}
				}
				if got := f.stored(t, scopeN(i)); got != int64(tc.per) {
					missing++
				}
			}
			if failed > 0 || missing > 0 {
				t.Errorf("%d of %d Applies failed, %d scopes without their %d keys", failed, tc.applies, missing, tc.per)
			}
			t.Logf("Applies per transaction: %v", log.snapshot())
		})
	}
}
