package zookeeper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/zookeeper"
	"github.com/registrar-dev/registrar/test/support/netproxy"
	"github.com/registrar-dev/registrar/test/support/zktest"
)

// server is the ZooKeeper process shared by the tests of this package; serverErr says why it
// is not running. Tests that need it fail (never skip) through requireServer.
var (
	server    *zktest.Server
	serverErr error
	tmpDir    string
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	var err error
	if tmpDir, err = os.MkdirTemp("", "registrar-zookeeper-store-test-"); err != nil {
		serverErr = err
		return m.Run()
	}
	defer os.RemoveAll(tmpDir)
	if server, serverErr = zktest.Start(tmpDir); serverErr != nil {
		server = nil
		return m.Run()
	}
	defer server.Stop()
	return m.Run()
}

func requireServer(t *testing.T) *zktest.Server {
	t.Helper()
	if server == nil {
		t.Fatalf("ZooKeeper test server unavailable: %v; these tests need Debian's zookeeper package "+
			"(hack/zookeeper.sh installs it; make test runs it) and java", serverErr)
	}
	return server
}

// connect opens a client session to addr and waits until it has a session.
func connect(t *testing.T, addr string, sessionTimeout time.Duration) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect([]string{addr}, sessionTimeout, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	t.Cleanup(conn.Close)
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() { // keep draining so the client never blocks on its event channel
					for range events {
					}
				}()
				return conn
			}
		case <-timeout:
			t.Fatalf("no ZooKeeper session with %s after 60 s", addr)
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// fixture is a Store under a base path private to the test and a raw client of the server.
type fixture struct {
	store *zookeeper.Store
	raw   *zk.Conn
	base  string
}

func newFixture(t *testing.T, conn *zk.Conn, opts zookeeper.Options) fixture {
	t.Helper()
	srv := requireServer(t)
	if opts.BasePath == "" {
		opts.BasePath = "/t/" + strings.ReplaceAll(t.Name(), "/", "_")
	}
	if conn == nil {
		conn = connect(t, srv.Addr, 10*time.Second)
	}
	f := fixture{store: zookeeper.New(conn, opts), raw: connect(t, srv.Addr, 10*time.Second), base: opts.BasePath}
	f.deleteAll(t, f.base)
	return f
}

// deleteAll removes p and everything under it (a rerun with -count starts from nothing).
func (f fixture) deleteAll(t *testing.T, p string) {
	t.Helper()
	children, _, err := f.raw.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return
	}
	if err != nil {
		t.Fatalf("children %s: %v", p, err)
	}
	for _, c := range children {
		f.deleteAll(t, p+"/"+c)
	}
	if err := f.raw.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("delete %s: %v", p, err)
	}
}

func (f fixture) create(t *testing.T, p, data string) {
	t.Helper()
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i := range parts {
		cur := "/" + strings.Join(parts[:i+1], "/")
		d := []byte(nil)
		if i == len(parts)-1 {
			d = []byte(data)
		}
		if _, err := f.raw.Create(cur, d, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", cur, err)
		}
	}
}

func (f fixture) children(t *testing.T, service string) []string {
	t.Helper()
	c, _, err := f.raw.Children(f.base + "/" + service)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("children: %v", err)
	}
	slices.Sort(c)
	return c
}

func (f fixture) get(t *testing.T, p string) []byte {
	t.Helper()
	data, _, err := f.raw.Get(p)
	if err != nil {
		t.Fatalf("get %s: %v", p, err)
	}
	return data
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

var scope = store.Scope{Service: "web", Namespace: "shop"}

func ep(pod string) store.Endpoint {
	return store.Endpoint{
		Service: "web", Namespace: "shop", Pod: pod, UID: "uid-" + pod, Address: "10.0.0.1",
		Ports: map[string]int32{"http": 8080, "https": 8443}, Node: "node-a", Zone: "z1", Cluster: "c1",
		Owner: "reg-uid", RegisteredAt: time.Date(2025, 3, 4, 5, 6, 7, 891000000, time.UTC),
	}
}

func (f fixture) apply(t *testing.T, c store.Changes) []store.Record {
	t.Helper()
	written, err := f.store.Apply(ctx(t), scope, c)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return written
}

func (f fixture) list(t *testing.T, sc store.Scope) map[string]store.Record {
	t.Helper()
	recs, err := f.store.List(ctx(t), sc)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]store.Record{}
	for _, r := range recs {
		out[r.Pod] = r
	}
	return out
}

func sameEndpoint(a, b store.Endpoint) bool {
	if !a.RegisteredAt.Equal(b.RegisteredAt) {
		return false
	}
	a.RegisteredAt, b.RegisteredAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// TestGoldenInstance compares the znode's bytes with Curator's ServiceInstance JSON, field by
// field and in Jackson's order.
func TestGoldenInstance(t *testing.T) {
	f := newFixture(t, nil, zookeeper.Options{})
	written := f.apply(t, store.Changes{Create: []store.Endpoint{ep("web-0")}})
	golden, err := os.ReadFile("testdata/instance.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, golden); err != nil {
		t.Fatalf("golden file: %v", err)
	}
	p := f.base + "/web/shop.web-0"
	if got := f.get(t, p); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("znode %s =\n%s\nwant (testdata/instance.golden.json)\n%s", p, got, want.Bytes())
	}
	if len(written) != 1 || written[0].Key != p || !sameEndpoint(written[0].Endpoint, ep("web-0")) {
		t.Errorf("Apply returned %+v", written)
	}
	listed := f.list(t, scope)["web-0"]
	if listed.Revision != written[0].Revision || !sameEndpoint(listed.Endpoint, ep("web-0")) {
		t.Errorf("listed %+v, want %+v", listed, written[0])
	}
}

func TestRegisterUpdateDeregister(t *testing.T) {
	f := newFixture(t, nil, zookeeper.Options{PortName: "https"})
	written := f.apply(t, store.Changes{Create: []store.Endpoint{ep("web-0"), ep("web-1")}})
	if got := f.children(t, "web"); !slices.Equal(got, []string{"shop.web-0", "shop.web-1"}) {
		t.Fatalf("children = %q", got)
	}
	var in zookeeper.Instance
	if err := json.Unmarshal(f.get(t, f.base+"/web/shop.web-0"), &in); err != nil || *in.Port != 8443 {
		t.Errorf("port with PortName https = %v (%v), want 8443", in.Port, err)
	}

	next := ep("web-0")
	next.Address = "10.0.0.9"
	updated := f.apply(t, store.Changes{Update: []store.Update{{Old: written[0], New: next}}, Delete: []store.Record{written[1]}})
	if got := f.children(t, "web"); !slices.Equal(got, []string{"shop.web-0"}) {
		t.Errorf("children after deregistering web-1 = %q", got)
	}
	listed := f.list(t, scope)
	if !sameEndpoint(listed["web-0"].Endpoint, next) || listed["web-0"].Revision != updated[0].Revision {
		t.Errorf("web-0 listed %+v, want %+v at %d", listed["web-0"], next, updated[0].Revision)
	}
	f.apply(t, store.Changes{Delete: []store.Record{updated[0]}})
	if got := f.children(t, "web"); len(got) != 0 {
		t.Errorf("children after draining = %q", got)
	}
}

func TestForeignNodesLeftAlone(t *testing.T) {
	f := newFixture(t, nil, zookeeper.Options{})
	curator := `{"name":"web","id":"6f1c","address":"10.9.9.9","port":80,"sslPort":null,"payload":null,` +
		`"registrationTimeUTC":1,"serviceType":"DYNAMIC","uriSpec":null}`
	f.create(t, f.base+"/web/6f1c", curator)           // a Java service registered itself
	f.create(t, f.base+"/web/shop.taken", curator)     // someone else's node at one of our names
	f.create(t, f.base+"/web/other.web-0", `not json`) // another namespace
	f.create(t, f.base+"/other/shop.web-0", curator)   // another service

	listed := f.list(t, scope)
	if len(listed) != 1 || listed["taken"].Owner != "" {
		t.Fatalf("List = %+v, want only the unowned shop.taken", listed)
	}
	if _, err := f.store.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("new"), ep("taken")}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create over a foreign node: error %v, want ErrConflict", err)
	}
	if got := f.children(t, "web"); !slices.Equal(got, []string{"6f1c", "other.web-0", "shop.taken"}) {
		t.Errorf("a failed multi left children %q", got)
	}
	mine := f.apply(t, store.Changes{Create: []store.Endpoint{ep("web-0")}})
	f.apply(t, store.Changes{Delete: mine})
	if got := f.children(t, "web"); !slices.Equal(got, []string{"6f1c", "other.web-0", "shop.taken"}) {
		t.Errorf("children after our register/deregister = %q, want the foreign ones untouched", got)
	}
	if got := string(f.get(t, f.base+"/web/shop.taken")); got != curator {
		t.Errorf("foreign node changed: %s", got)
	}
}

func TestStaleRevision(t *testing.T) {
	tests := []struct {
		name    string
		tamper  func(t *testing.T, f fixture, p string)
		changes func(r store.Record) store.Changes
	}{
		{"update after another writer changed the node",
			func(t *testing.T, f fixture, p string) { _, _ = f.raw.Set(p, []byte(`{}`), -1) },
			func(r store.Record) store.Changes {
				return store.Changes{Update: []store.Update{{Old: r, New: ep("web-0")}}}
			}},
		{"delete after the node was deleted and created again with the same data",
			func(t *testing.T, f fixture, p string) {
				data := f.get(t, p)
				_ = f.raw.Delete(p, -1)
				f.create(t, p, string(data))
			},
			func(r store.Record) store.Changes { return store.Changes{Delete: []store.Record{r}} }},
		{"update after the node was deleted",
			func(t *testing.T, f fixture, p string) { _ = f.raw.Delete(p, -1) },
			func(r store.Record) store.Changes {
				return store.Changes{Update: []store.Update{{Old: r, New: ep("web-0")}}}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, zookeeper.Options{})
			r := f.apply(t, store.Changes{Create: []store.Endpoint{ep("web-0")}})[0]
			tc.tamper(t, f, r.Key)
			before := f.children(t, "web")
			if _, err := f.store.Apply(ctx(t), scope, tc.changes(r)); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("Apply error = %v, want ErrConflict", err)
			}
			if after := f.children(t, "web"); !slices.Equal(after, before) {
				t.Errorf("children %q -> %q", before, after)
			}
		})
	}
}

// TestMultiIsAtomic: a conflict on the last operation leaves the earlier ones undone.
func TestMultiIsAtomic(t *testing.T) {
	f := newFixture(t, nil, zookeeper.Options{})
	f.create(t, f.base+"/web/shop.z-taken", `{}`)
	_, err := f.store.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("a"), ep("b"), ep("z-taken")}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Apply error = %v, want ErrConflict", err)
	}
	if got := f.children(t, "web"); !slices.Equal(got, []string{"shop.z-taken"}) {
		t.Errorf("children = %q, want only the foreign node", got)
	}
}

// TestSessionExpiry partitions the operator's client from ZooKeeper until the server expires
// its session: the persistent instances stay (no mass disappearance), and the client goes on
// with a new session.
func TestSessionExpiry(t *testing.T) {
	srv := requireServer(t)
	proxy, err := netproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	const sessionTimeout = 2 * time.Second
	conn := connect(t, proxy.Addr, sessionTimeout)
	f := newFixture(t, conn, zookeeper.Options{Timeout: 2 * time.Second})
	written := f.apply(t, store.Changes{Create: []store.Endpoint{ep("web-0"), ep("web-1")}})
	// An ephemeral node of the operator's session shows when the server has expired it.
	marker := f.base + "/session-marker"
	if _, err := conn.Create(marker, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create marker: %v", err)
	}
	oldSession := conn.SessionID()

	proxy.Cut()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, _, err := f.raw.Exists(marker)
		if err == nil && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session not expired 60 s after the partition")
		}
		time.Sleep(100 * time.Millisecond) // polling the server's view, not synchronising
	}
	if got := f.children(t, "web"); !slices.Equal(got, []string{"shop.web-0", "shop.web-1"}) {
		t.Fatalf("instances after the operator's session expired = %q, want both", got)
	}
	proxy.Restore()

	// The client reconnects with a new session; the store works again.
	var listed []store.Record
	deadline = time.Now().Add(60 * time.Second)
	for {
		if listed, err = f.store.List(ctx(t), scope); err == nil && conn.SessionID() != 0 && conn.SessionID() != oldSession {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store not working 60 s after the partition healed: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling the client's reconnection
	}
	if len(listed) != 2 {
		t.Errorf("listed %d records after the new session, want 2", len(listed))
	}
	f.apply(t, store.Changes{Delete: written[:1]})
	if got := f.children(t, "web"); !slices.Equal(got, []string{"shop.web-1"}) {
		t.Errorf("children after a delete on the new session = %q", got)
	}
}

// TestServerRestart stops a dedicated ZooKeeper: calls fail within the timeout (never as
// conflicts), and after a restart on the same data the client reconnects, the instances are
// still there, and writes work.
func TestServerRestart(t *testing.T) {
	requireServer(t)
	srv, err := zktest.Start(t.TempDir())
	if err != nil {
		t.Fatalf("dedicated ZooKeeper: %v", err)
	}
	t.Cleanup(srv.Stop)
	conn := connect(t, srv.Addr, 10*time.Second)
	s := zookeeper.New(conn, zookeeper.Options{BasePath: "/restart", Timeout: time.Second})
	written, err := s.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}

	srv.Stop()
	start := time.Now()
	_, err = s.Apply(context.Background(), scope, store.Changes{Create: []store.Endpoint{ep("web-1")}})
	if err == nil || errors.Is(err, store.ErrConflict) {
		t.Fatalf("Apply with the server down: error %v, want a non-conflict error", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Apply with the server down took %s, want about the 1 s timeout", took)
	}
	t.Logf("Apply with the server down failed after %s: %v", time.Since(start).Round(time.Millisecond), err)

	if err := srv.Resume(); err != nil {
		t.Fatalf("restart ZooKeeper: %v", err)
	}
	var listed []store.Record
	deadline := time.Now().Add(60 * time.Second)
	for {
		if listed, err = s.List(ctx(t), scope); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store not working 60 s after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling the client's reconnection
	}
	if len(listed) != 1 || listed[0].Revision != written[0].Revision {
		t.Fatalf("listed after restart %+v, want the instance written before at revision %d", listed, written[0].Revision)
	}
	if _, err := s.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{ep("web-1")}, Delete: written}); err != nil {
		t.Fatalf("Apply after restart: %v", err)
	}
}

func TestNamespacesAreSeparate(t *testing.T) {
	f := newFixture(t, nil, zookeeper.Options{MaxOps: 2})
	other := store.Scope{Service: "web", Namespace: "shop2"}
	var c store.Changes
	for i := range 5 {
		c.Create = append(c.Create, ep(fmt.Sprintf("web-%d", i)))
	}
	f.apply(t, c)
	e := ep("web-0")
	e.Namespace = other.Namespace
	if _, err := f.store.Apply(ctx(t), other, store.Changes{Create: []store.Endpoint{e}}); err != nil {
		t.Fatalf("Apply in shop2: %v", err)
	}
	if n := len(f.list(t, scope)); n != 5 {
		t.Errorf("shop lists %d records, want 5", n)
	}
	if got := f.list(t, other); len(got) != 1 || got["web-0"].Namespace != "shop2" {
		t.Errorf("shop2 lists %+v", got)
	}
}
