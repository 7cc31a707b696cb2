package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
)

// leaseOf is the lease a key is attached to (0: none), and whether the key exists.
func (f fixture) leaseOf(t *testing.T, key string) (int64, bool) {
	t.Helper()
	resp, err := f.raw.Get(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0, false
	}
	return resp.Kvs[0].Lease, true
}

func TestLeaseBackstopOffByDefault(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	f.seed(t, "web-0")
	if lease, ok := f.leaseOf(t, f.store.Key(scope, "web-0")); !ok || lease != 0 {
		t.Errorf("endpoint lease = %x (present %v), want none", lease, ok)
	}
}

func TestLeaseBackstopExpiresWhenNobodyKeepsItAlive(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	leaseKey := etcd.LeaseKey(f.prefix, "ns")
	newStore := func() *etcd.Store {
		cli := newClient(t, requireServer(t))
		return etcd.New(cli, etcd.Options{Prefix: f.prefix, LeaseTTL: 2 * time.Second, Leases: cli, LeaseKey: leaseKey})
	}
	first := newStore()
	if _, err := first.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}}); err != nil {
		t.Fatal(err)
	}
	lease0, _ := f.leaseOf(t, first.Key(scope, "web-0"))
	if lease0 == 0 {
		t.Fatal("endpoint written without a lease")
	}
	// A successor (the next leader) adopts the recorded lease instead of granting its own.
	next := newStore()
	if _, err := next.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-1")}}); err != nil {
		t.Fatal(err)
	}
	if lease1, _ := f.leaseOf(t, next.Key(scope, "web-1")); lease1 != lease0 {
		t.Errorf("successor wrote with lease %x, want the adopted %x", lease1, lease0)
	}
	first.Close()
	time.Sleep(3 * time.Second) // longer than the TTL: the successor alone keeps the lease alive
	if _, ok := f.leaseOf(t, first.Key(scope, "web-0")); !ok {
		t.Fatal("endpoint expired while a writer still kept its lease alive")
	}
	next.Close()
	deadline := time.Now().Add(20 * time.Second)
	for len(f.keys(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("keys left %s after every writer stopped: %v", 20*time.Second, f.keys(t))
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline
	}
}

// TestLeaseBackstopAdoptedAtStart: an operator restart (or a failover) with nothing to write.
// The new leader's Store must re-attach the installation's lease as soon as it runs (its
// Start, which the manager calls once this replica leads), before any Apply: otherwise the
// old lease lapses and every endpoint expires while nothing changed.
func TestLeaseBackstopAdoptedAtStart(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	const ttl = 2 * time.Second
	leaseKey := etcd.LeaseKey(f.prefix, "ns")
	newStore := func() *etcd.Store {
		cli := newClient(t, requireServer(t))
		return etcd.New(cli, etcd.Options{Prefix: f.prefix, LeaseTTL: ttl, Leases: cli, LeaseKey: leaseKey})
	}
	first := newStore()
	if _, err := first.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0"), ep("web-1")}}); err != nil {
		t.Fatal(err)
	}
	next := newStore()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- next.Start(runCtx) }()
	t.Cleanup(func() { stop(); <-done; next.Close() }) //nolint:errcheck // Start's error after stop is not what this test checks
	first.Close()                                      // the old leader is gone; the new one has nothing to write
	time.Sleep(3 * ttl)                                // the scenario: three TTLs with no write, not synchronisation
	for _, pod := range []string{"web-0", "web-1"} {
		if _, ok := f.leaseOf(t, first.Key(scope, pod)); !ok {
			t.Errorf("%s expired %s after a restart with nothing to write: the new leader did not adopt the lease", pod, 3*ttl)
		}
	}
}

// TestLeaseKeeperKeepsLeaseFromFollower: a replica that does not lead (it runs only the
// LeaseKeeper, never Start or Apply) keeps the installation's lease alive after the writer
// is gone, as through a failover slower than the TTL.
func TestLeaseKeeperKeepsLeaseFromFollower(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	const ttl = 2 * time.Second
	leaseKey := etcd.LeaseKey(f.prefix, "ns")
	newStore := func() *etcd.Store {
		cli := newClient(t, requireServer(t))
		return etcd.New(cli, etcd.Options{Prefix: f.prefix, LeaseTTL: ttl, Leases: cli, LeaseKey: leaseKey})
	}
	writer := newStore()
	if _, err := writer.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}}); err != nil {
		t.Fatal(err)
	}
	follower := newStore()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- etcd.LeaseKeeper{Store: follower}.Start(runCtx) }()
	t.Cleanup(func() { stop(); <-done; follower.Close() }) //nolint:errcheck // Start's error after stop is not what this test checks
	writer.Close()
	time.Sleep(3 * ttl) // the scenario: the writer is gone for three TTLs, not synchronisation
	if _, ok := f.leaseOf(t, writer.Key(scope, "web-0")); !ok {
		t.Errorf("web-0 expired %s after the writer left while a follower ran", 3*ttl)
	}
	if (etcd.LeaseKeeper{}).NeedLeaderElection() {
		t.Error("the lease keeper must run on every replica")
	}
}
