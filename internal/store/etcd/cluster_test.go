package etcd_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// clusterStore is a Store of cluster on the fixture's (shared) prefix, with its own client.
func clusterStore(t *testing.T, f fixture, cluster string, opts etcd.Options) *etcd.Store {
	t.Helper()
	cli := newClient(t, requireServer(t))
	opts.Prefix, opts.Cluster = f.prefix, cluster
	if opts.LeaseTTL > 0 {
		opts.Leases = cli
	}
	return etcd.New(cli, opts)
}

func epOf(cluster, pod string) store.Endpoint {
	e := ep(pod)
	e.Cluster = cluster
	return e
}

func pods(recs []store.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Cluster+"/"+r.Pod)
	}
	slices.Sort(out)
	return out
}

// TestSharedLayoutIsolatesClusters: two clusters publish the same pod name of one service;
// each sees, scans and may touch only its own records, whatever it is asked to do.
func TestSharedLayoutIsolatesClusters(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	c1, c2 := clusterStore(t, f, "c1", etcd.Options{}), clusterStore(t, f, "c2", etcd.Options{})
	for _, s := range []struct {
		st      *etcd.Store
		cluster string
	}{{c1, "c1"}, {c2, "c2"}} {
		if _, err := s.st.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{epOf(s.cluster, "web-0"), epOf(s.cluster, "web-1")}}); err != nil {
			t.Fatalf("%s create: %v", s.cluster, err)
		}
	}
	want := []string{
		f.prefix + "/web/shop/c1.web-0", f.prefix + "/web/shop/c1.web-1",
		f.prefix + "/web/shop/c2.web-0", f.prefix + "/web/shop/c2.web-1",
	}
	if got := f.keys(t); !slices.Equal(got, want) {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	if got := wire.ClusterKey(f.prefix, "c1", "web", "shop", "web-0"); got != want[0] || c1.Key(scope, "web-0") != want[0] {
		t.Errorf("ClusterKey = %q, Store.Key = %q, want %q", got, c1.Key(scope, "web-0"), want[0])
	}
	own, err := c1.List(ctx(t), scope)
	if err != nil {
		t.Fatal(err)
	}
	if got := pods(own); !slices.Equal(got, []string{"c1/web-0", "c1/web-1"}) {
		t.Errorf("c1 lists %v, want only its own records", got)
	}
	all, err := c1.ListAll(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := pods(all); !slices.Equal(got, []string{"c1/web-0", "c1/web-1"}) {
		t.Errorf("c1 scans %v, want only its own records", got)
	}

	// c2's records, as a raw reader sees them: c1 may neither delete nor overwrite them,
	// nor create a record in c2's name.
	theirs, err := c2.List(ctx(t), scope)
	if err != nil {
		t.Fatal(err)
	}
	before := f.revision(t)
	for name, c := range map[string]store.Changes{
		"delete":         {Delete: []store.Record{theirs[0]}},
		"update":         {Update: []store.Update{{Old: theirs[0], New: epOf("c2", "web-0")}}},
		"create as c2":   {Create: []store.Endpoint{epOf("c2", "web-9")}},
		"relabel to c1":  {Update: []store.Update{{Old: theirs[1], New: epOf("c1", "web-1")}}},
		"mixed with own": {Create: []store.Endpoint{epOf("c1", "web-5")}, Delete: []store.Record{theirs[1]}},
	} {
		if _, err := c1.Apply(ctx(t), scope, c); !errors.Is(err, store.ErrForeignCluster) {
			t.Errorf("%s of c2's record by c1: err = %v, want ErrForeignCluster", name, err)
		}
	}
	if after := f.revision(t); after != before {
		t.Errorf("refused changes wrote to the store (revision %d -> %d)", before, after)
	}

	// A value under c1's keys that names another cluster is nobody's: listed without owner.
	f.put(t, c1.Key(scope, "web-7"), mustJSON(t, epOf("c2", "web-7")))
	own, _ = c1.List(ctx(t), scope)
	for _, r := range own {
		if r.Pod == "web-7" && r.Owner != "" {
			t.Errorf("record naming cluster c2 under c1's key is owned: %+v", r)
		}
	}
}

// TestClusterFenceRefusesAnotherInstallation: two installations given one cluster ID. The
// second never takes the fence and never writes; the first keeps writing; a new replica of
// the first takes over as before.
func TestClusterFenceRefusesAnotherInstallation(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	cliA, cliB, cliA2 := newClient(t, requireServer(t)), newClient(t, requireServer(t)), newClient(t, requireServer(t))
	fenceA := fence.NewCluster(cliA, f.prefix, "c1", "inst-a", "a-0", 0)
	fenceB := fence.NewCluster(cliB, f.prefix, "c1", "inst-b", "b-0", 0)
	a := etcd.New(cliA, etcd.Options{Prefix: f.prefix, Cluster: "c1", Fence: fenceA})
	b := etcd.New(cliB, etcd.Options{Prefix: f.prefix, Cluster: "c1", Fence: fenceB, Timeout: 2 * time.Second})
	if err := fenceA.Acquire(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := f.get(t, wire.LayoutKey(f.prefix)); v != wire.LayoutShared {
		t.Errorf("layout marker = %q, want %q", v, wire.LayoutShared)
	}
	if _, err := a.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{epOf("c1", "web-0")}}); err != nil {
		t.Fatal(err)
	}
	err := fenceB.Acquire(ctx(t))
	if !errors.Is(err, store.ErrClusterClaimed) {
		t.Fatalf("second installation's Acquire: err = %v, want ErrClusterClaimed", err)
	}
	t.Logf("refused: %v", err)
	start := time.Now()
	if _, err := b.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{epOf("c1", "web-1")}}); !errors.Is(err, store.ErrClusterClaimed) {
		t.Errorf("second installation's write: err = %v, want ErrClusterClaimed", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refused write took %s: it must fail at once, not wait for the fence", d)
	}
	if got := f.keys(t); !slices.Contains(got, a.Key(scope, "web-0")) || slices.Contains(got, a.Key(scope, "web-1")) {
		t.Errorf("keys = %v", got)
	}
	if _, err := a.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{epOf("c1", "web-2")}}); err != nil {
		t.Errorf("the holder's write after the refused claim: %v", err)
	}
	// A new replica of installation A (a failover) takes the fence; the old one is deposed.
	fenceA2 := fence.NewCluster(cliA2, f.prefix, "c1", "inst-a", "a-1", 0)
	if err := fenceA2.Acquire(ctx(t)); err != nil {
		t.Fatalf("same installation's new leader: %v", err)
	}
	if _, err := a.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{epOf("c1", "web-3")}}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("deposed replica's write: err = %v, want ErrFenced", err)
	}
	// Another cluster ID on the same prefix is no clash.
	other := fence.NewCluster(cliB, f.prefix, "c2", "inst-b", "b-0", 0)
	if err := other.Acquire(ctx(t)); err != nil {
		t.Errorf("cluster c2's fence: %v", err)
	}
}

// TestLayoutMismatchRefused: a prefix written by single-cluster installations is not
// joined by a shared one, and the reverse.
func TestLayoutMismatchRefused(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	cli := newClient(t, requireServer(t))
	if err := fence.CheckLayout(ctx(t), cli, f.prefix); err != nil {
		t.Errorf("CheckLayout on an empty prefix: %v", err)
	}
	clusterFence := fence.NewCluster(cli, f.prefix, "c1", "inst-a", "a-0", 0)
	if err := clusterFence.Acquire(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := fence.CheckLayout(ctx(t), cli, f.prefix); err == nil {
		t.Error("CheckLayout accepted a shared prefix for a single-cluster installation")
	}
	f.put(t, wire.LayoutKey(f.prefix), "single")
	f.del(t, wire.ClusterFenceKey(f.prefix, "c1"))
	if err := fence.NewCluster(cli, f.prefix, "c1", "inst-a", "a-0", 0).Acquire(ctx(t)); !errors.Is(err, store.ErrClusterClaimed) {
		t.Errorf("shared fence on a prefix of another layout: err = %v, want refusal", err)
	}
}

// TestClusterLeasesAreSeparate: each cluster's records carry its own lease; a cluster whose
// writer is gone ages out alone.
func TestClusterLeasesAreSeparate(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	c1 := clusterStore(t, f, "c1", etcd.Options{LeaseTTL: 2 * time.Second})
	c2 := clusterStore(t, f, "c2", etcd.Options{LeaseTTL: 2 * time.Second})
	t.Cleanup(c2.Close)
	for _, s := range []struct {
		st      *etcd.Store
		cluster string
	}{{c1, "c1"}, {c2, "c2"}} {
		if _, err := s.st.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{epOf(s.cluster, "web-0")}}); err != nil {
			t.Fatal(err)
		}
	}
	l1, _ := f.leaseOf(t, c1.Key(scope, "web-0"))
	l2, _ := f.leaseOf(t, c2.Key(scope, "web-0"))
	if l1 == 0 || l2 == 0 || l1 == l2 {
		t.Fatalf("leases c1 %x, c2 %x: want one of its own each", l1, l2)
	}
	if v, _, ok := f.get(t, wire.ClusterLeaseKey(f.prefix, "c1")); !ok || v == "" {
		t.Errorf("c1's lease not recorded at %s", wire.ClusterLeaseKey(f.prefix, "c1"))
	}
	c1.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, gone := f.leaseOf(t, c1.Key(scope, "web-0"))
		if !gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("c1's record did not expire after its writer stopped")
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline
	}
	if _, ok := f.leaseOf(t, c2.Key(scope, "web-0")); !ok {
		t.Error("c2's record expired with c1's lease")
	}
}
