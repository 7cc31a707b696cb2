package multi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/test/etcdtest"
)

var (
	server    *etcdtest.Server
	serverErr error
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "registrar-multi-store-test-")
	if err != nil {
		serverErr = err
		return m.Run()
	}
	defer os.RemoveAll(dir)
	if server, serverErr = etcdtest.Start(dir); serverErr != nil {
		server = nil
		return m.Run()
	}
	defer server.Stop()
	return m.Run()
}

func client(t *testing.T, s *etcdtest.Server) *clientv3.Client {
	t.Helper()
	if s == nil {
		t.Fatalf("etcd test server unavailable: %v (set ETCD_BIN; make test does)", serverErr)
	}
	cli, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// fixture is a multi.Store over two etcd stores "a" and "b" under prefixes of the test.
type fixture struct {
	multi  *multi.Store
	a, b   *etcd.Store
	raw    *clientv3.Client
	prefix string
}

func newFixture(t *testing.T, bServer *etcdtest.Server) fixture {
	t.Helper()
	raw := client(t, server)
	prefix := "/t/" + t.Name()
	if _, err := raw.Delete(ctx(t), prefix+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if bServer == nil {
		bServer = server
	}
	f := fixture{
		a:      etcd.New(client(t, server), etcd.Options{Prefix: prefix + "/a", Timeout: time.Second}),
		b:      etcd.New(client(t, bServer), etcd.Options{Prefix: prefix + "/b", Timeout: time.Second}),
		raw:    raw,
		prefix: prefix,
	}
	m, err := multi.New([]multi.Named{{Name: "a", Store: f.a}, {Name: "b", Store: f.b}}, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	f.multi = m
	return f
}

const owner = "reg-uid"

func ep(pod, ip string) store.Endpoint {
	return store.Endpoint{Service: "web", Namespace: "shop", Pod: pod, UID: "uid-" + pod, Address: ip,
		Ports: map[string]int32{"http": 80}, Owner: owner}
}

// converge plays the controller: list, plan, apply.
func (f fixture) converge(t *testing.T, scope store.Scope, desired ...store.Endpoint) ([]store.Record, error) {
	t.Helper()
	listed, err := f.multi.List(ctx(t), scope)
	if err != nil {
		return nil, err
	}
	current := map[string]store.Record{}
	for _, r := range listed {
		current[r.Pod] = r
	}
	want := map[string]store.Endpoint{}
	for _, e := range desired {
		want[e.Pod] = e
	}
	p := plan.Compute(owner, want, current, time.Now())
	if p.Changes.Len() == 0 {
		return nil, nil
	}
	return f.multi.Apply(ctx(t), scope, p.Changes)
}

// pods lists one backend directly: pod -> address.
func pods(t *testing.T, s store.Store, scope store.Scope) map[string]string {
	t.Helper()
	recs, err := s.List(ctx(t), scope)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]string{}
	for _, r := range recs {
		out[r.Pod] = r.Address
	}
	return out
}

func same(a, b map[string]string) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func TestDefaultsAndSingleStore(t *testing.T) {
	f := newFixture(t, nil)
	scope := store.Scope{Service: "web", Namespace: "shop"}
	if _, err := f.converge(t, scope, ep("web-0", "10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if got := pods(t, f.a, scope); !same(got, map[string]string{"web-0": "10.0.0.1"}) {
		t.Errorf("default store a holds %v", got)
	}
	if got := pods(t, f.b, scope); len(got) != 0 {
		t.Errorf("store b, not a default, holds %v", got)
	}
	// One named store: the records are that store's own, revisions included.
	listed, err := f.multi.List(ctx(t), store.Scope{Service: "web", Namespace: "shop", Stores: "a"})
	direct, _ := f.a.List(ctx(t), scope)
	if err != nil || len(listed) != 1 || listed[0].Revision != direct[0].Revision || listed[0].Key != direct[0].Key {
		t.Errorf("single-store List = %+v, %v; want the store's own %+v", listed, err, direct)
	}
}

func TestPublishToTwoStores(t *testing.T) {
	f := newFixture(t, nil)
	scope := store.Scope{Service: "web", Namespace: "shop", Stores: "a,b"}
	written, err := f.converge(t, scope, ep("web-0", "10.0.0.1"), ep("web-1", "10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"web-0": "10.0.0.1", "web-1": "10.0.0.2"}
	for name, s := range map[string]store.Store{"a": f.a, "b": f.b} {
		if got := pods(t, s, scope); !same(got, want) {
			t.Errorf("store %s holds %v, want %v", name, got, want)
		}
	}
	if len(written) != 2 || written[0].UID != "uid-web-0" || written[1].Address != "10.0.0.2" {
		t.Errorf("Apply returned %+v, want both complete records", written)
	}
	for _, st := range f.multi.States(scope, owner) {
		if st.Registered != 2 || st.Err != nil {
			t.Errorf("state %+v, want 2 registered, no error", st)
		}
	}
	// Deregister web-0 from both.
	if _, err := f.converge(t, scope, ep("web-1", "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]store.Store{"a": f.a, "b": f.b} {
		if got := pods(t, s, scope); !same(got, map[string]string{"web-1": "10.0.0.2"}) {
			t.Errorf("store %s holds %v after deregistering web-0", name, got)
		}
	}
	if p, _ := f.converge(t, scope, ep("web-1", "10.0.0.2")); p != nil {
		t.Errorf("converged stores planned more writes: %+v", p)
	}
}

// TestRepairsOneStore: a record missing from or different in one store is rewritten there.
func TestRepairsOneStore(t *testing.T) {
	f := newFixture(t, nil)
	scope := store.Scope{Service: "web", Namespace: "shop", Stores: "a,b"}
	if _, err := f.converge(t, scope, ep("web-0", "10.0.0.1"), ep("web-1", "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.raw.Delete(ctx(t), f.b.Key(scope, "web-0")); err != nil {
		t.Fatal(err)
	}
	listed, err := f.multi.List(ctx(t), scope)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range listed {
		if r.Pod == "web-0" && (r.UID != "" || r.Owner != owner) {
			t.Errorf("pod missing from b listed as %+v, want owned without UID", r)
		}
	}
	if _, err := f.converge(t, scope, ep("web-0", "10.0.0.1"), ep("web-1", "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	if got := pods(t, f.b, scope); !same(got, map[string]string{"web-0": "10.0.0.1", "web-1": "10.0.0.2"}) {
		t.Errorf("store b after repair holds %v", got)
	}
}

// TestOneStoreDown: the other store is still written; the error names the failing store;
// the stores converge when it is back.
func TestOneStoreDown(t *testing.T) {
	client(t, server)
	dedicated, err := etcdtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dedicated.Stop)
	f := newFixture(t, dedicated)
	scope := store.Scope{Service: "web", Namespace: "shop", Stores: "a,b"}
	if _, err := f.converge(t, scope, ep("web-0", "10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	dedicated.Stop()
	// A planned change while b is down (the controller plans from what it knows).
	listedA, _ := f.a.List(ctx(t), scope)
	_, err = f.multi.Apply(ctx(t), scope, store.Changes{
		Create: []store.Endpoint{ep("web-1", "10.0.0.2")},
		Delete: []store.Record{{Endpoint: listedA[0].Endpoint, Key: listedA[0].Key}},
	})
	if err == nil || !strings.Contains(err.Error(), "store b") || errors.Is(err, store.ErrConflict) {
		t.Fatalf("Apply with b down: error %v, want one naming store b, not a conflict", err)
	}
	if got := pods(t, f.a, scope); !same(got, map[string]string{"web-1": "10.0.0.2"}) {
		t.Errorf("store a holds %v, want web-1 written despite b being down", got)
	}
	states := f.multi.States(scope, owner)
	if states[0].Err != nil || states[1].Err == nil {
		t.Errorf("states %+v, want a synced and b failing", states)
	}
	if _, err := f.multi.List(ctx(t), scope); err == nil || !strings.Contains(err.Error(), "store b") {
		t.Errorf("List with b down: error %v, want one naming store b", err)
	}

	if err := dedicated.Resume(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err = f.converge(t, scope, ep("web-1", "10.0.0.2")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged 30 s after b came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling the client's reconnection
	}
	if got := pods(t, f.b, scope); !same(got, map[string]string{"web-1": "10.0.0.2"}) {
		t.Errorf("store b after it came back holds %v", got)
	}
}

func TestForeignOwnerInOneStore(t *testing.T) {
	f := newFixture(t, nil)
	scope := store.Scope{Service: "web", Namespace: "shop", Stores: "a,b"}
	foreign := ep("web-0", "10.9.9.9")
	foreign.Owner = "someone-else"
	if _, err := f.b.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{foreign}}); err != nil {
		t.Fatal(err)
	}
	listed, err := f.multi.List(ctx(t), scope)
	if err != nil || len(listed) != 1 || listed[0].Owner == owner {
		t.Fatalf("List = %+v, %v; want web-0 not ours", listed, err)
	}
	if _, err := f.converge(t, scope, ep("web-0", "10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if got := pods(t, f.b, scope); !same(got, map[string]string{"web-0": "10.9.9.9"}) {
		t.Errorf("foreign record in b changed: %v", got)
	}
}

func TestUnknownStore(t *testing.T) {
	f := newFixture(t, nil)
	scope := store.Scope{Service: "web", Namespace: "shop", Stores: "a,zookeeper"}
	if _, err := f.converge(t, store.Scope{Service: "web", Namespace: "shop"}, ep("web-0", "10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	listed, err := f.multi.List(ctx(t), scope)
	if !errors.Is(err, multi.ErrNotConfigured) || !strings.Contains(err.Error(), `["zookeeper"]`) {
		t.Errorf("List error = %v, want ErrNotConfigured naming zookeeper", err)
	}
	if len(listed) != 1 {
		t.Fatalf("List returned %+v, want the configured store's web-0 all the same", listed)
	}
	// The records of the configured store can still be removed.
	if _, err := f.multi.Apply(ctx(t), scope, store.Changes{Delete: listed}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got := pods(t, f.a, scope); len(got) != 0 {
		t.Errorf("store a still holds %v", got)
	}
	if _, err := multi.New([]multi.Named{{Name: "a", Store: f.a}}, []string{"b"}); err == nil {
		t.Errorf("New with an unknown default store succeeded")
	}
}
