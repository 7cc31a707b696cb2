package etcd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, nil)) }

// requireServer is the etcd process shared by the tests of this package; it fails (never
// skips) the test when there is none.
func requireServer(t *testing.T) *etcdtest.Server { return etcdtest.Shared(t) }

func newClient(t *testing.T, s *etcdtest.Server) *clientv3.Client {
	t.Helper()
	cli, err := s.Client()
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// fixture is a Store under a prefix private to the test, and a separate raw client of the
// same server to look at (and tamper with) what the Store wrote.
type fixture struct {
	store  *etcd.Store
	raw    *clientv3.Client
	prefix string
}

func newFixture(t *testing.T, opts etcd.Options) fixture {
	t.Helper()
	s := requireServer(t)
	if opts.Prefix == "" {
		opts.Prefix = "/t/" + t.Name()
	}
	f := fixture{
		store:  etcd.New(newClient(t, s), opts),
		raw:    newClient(t, s),
		prefix: opts.Prefix,
	}
	// The server outlives one run of the test (go test -count=N): start from nothing.
	f.clear(t, f.prefix+"/")
	return f
}

func (f fixture) clear(t *testing.T, prefix string) {
	t.Helper()
	if _, err := f.raw.Delete(ctx(t), prefix, clientv3.WithPrefix()); err != nil {
		t.Fatalf("raw delete %s*: %v", prefix, err)
	}
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func (f fixture) get(t *testing.T, key string) (value string, modRev int64, ok bool) {
	t.Helper()
	resp, err := f.raw.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("raw get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, false
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision, true
}

func (f fixture) put(t *testing.T, key, value string) int64 {
	t.Helper()
	resp, err := f.raw.Put(ctx(t), key, value)
	if err != nil {
		t.Fatalf("raw put %s: %v", key, err)
	}
	return resp.Header.Revision
}

func (f fixture) del(t *testing.T, key string) {
	t.Helper()
	if _, err := f.raw.Delete(ctx(t), key); err != nil {
		t.Fatalf("raw delete %s: %v", key, err)
	}
}

// keys lists every key under the test's prefix.
func (f fixture) keys(t *testing.T) []string {
	t.Helper()
	resp, err := f.raw.Get(ctx(t), f.prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("raw list: %v", err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// revision is the current revision of the whole etcd store.
func (f fixture) revision(t *testing.T) int64 {
	t.Helper()
	resp, err := f.raw.Get(ctx(t), "/revision-probe")
	if err != nil {
		t.Fatalf("raw get: %v", err)
	}
	return resp.Header.Revision
}

var (
	scope = store.Scope{Service: "web", Namespace: "shop"}
	regAt = time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC)
)

func ep(pod string) store.Endpoint {
	return store.Endpoint{
		Service:      scope.Service,
		Namespace:    scope.Namespace,
		Pod:          pod,
		UID:          "uid-" + pod,
		Address:      "10.0.0.1",
		Ports:        map[string]int32{"http": 8080, "grpc": 9000},
		Node:         "node-a",
		Zone:         "z1",
		Cluster:      "c1",
		Owner:        "reg-uid",
		RegisteredAt: regAt,
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sameEndpoint(a, b store.Endpoint) bool {
	if !a.RegisteredAt.Equal(b.RegisteredAt) {
		return false
	}
	a.RegisteredAt, b.RegisteredAt = time.Time{}, time.Time{}
	if len(a.Ports) == 0 && len(b.Ports) == 0 {
		a.Ports, b.Ports = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// listByPod lists scope and indexes the records by pod.
func (f fixture) listByPod(t *testing.T, sc store.Scope) map[string]store.Record {
	t.Helper()
	recs, err := f.store.List(ctx(t), sc)
	if err != nil {
		t.Fatalf("List(%+v): %v", sc, err)
	}
	out := make(map[string]store.Record, len(recs))
	for _, r := range recs {
		if _, dup := out[r.Pod]; dup {
			t.Fatalf("List returned pod %q twice", r.Pod)
		}
		out[r.Pod] = r
	}
	return out
}

// seed creates endpoints of pods through the Store and returns them as listed.
func (f fixture) seed(t *testing.T, pods ...string) map[string]store.Record {
	t.Helper()
	var c store.Changes
	for _, p := range pods {
		c.Create = append(c.Create, ep(p))
	}
	if _, err := f.store.Apply(ctx(t), scope, c); err != nil {
		t.Fatalf("seed Apply: %v", err)
	}
	return f.listByPod(t, scope)
}

func TestKey(t *testing.T) {
	tests := []struct {
		prefix string
		want   string
	}{
		{"", "/registrar/services/web/shop/web-0"},
		{etcd.DefaultPrefix, "/registrar/services/web/shop/web-0"},
		{"/custom", "/custom/web/shop/web-0"},
		{"custom", "/custom/web/shop/web-0"},
		{"/custom/", "/custom/web/shop/web-0"},
		{"//a/b//", "/a/b/web/shop/web-0"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("prefix %q", tc.prefix), func(t *testing.T) {
			s := etcd.New(nil, etcd.Options{Prefix: tc.prefix})
			if got := s.Key(scope, "web-0"); got != tc.want {
				t.Errorf("Key() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestApplyCreateLayout checks the key layout and the JSON value, as a consumer reading etcd
// directly sees them.
func TestApplyCreateLayout(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	e := ep("web-0")
	got, err := f.store.Apply(ctx(t), scope, store.Changes{Create: []store.Endpoint{e}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}

	key := f.prefix + "/web/shop/web-0"
	if keys := f.keys(t); !slices.Equal(keys, []string{key}) {
		t.Fatalf("keys under prefix = %q, want exactly %q", keys, key)
	}
	value, modRev, _ := f.get(t, key)

	var fields map[string]any
	if err := json.Unmarshal([]byte(value), &fields); err != nil {
		t.Fatalf("value %q is not a JSON object: %v", value, err)
	}
	wantFields := map[string]any{
		"service":      "web",
		"namespace":    "shop",
		"pod":          "web-0",
		"uid":          "uid-web-0",
		"address":      "10.0.0.1",
		"ports":        map[string]any{"http": float64(8080), "grpc": float64(9000)},
		"node":         "node-a",
		"zone":         "z1",
		"cluster":      "c1",
		"owner":        "reg-uid",
		"registeredAt": "2025-03-04T05:06:07.891011121Z",
	}
	if !reflect.DeepEqual(fields, wantFields) {
		t.Errorf("stored JSON =\n  %v\nwant\n  %v", fields, wantFields)
	}

	var decoded store.Endpoint
	if err := json.Unmarshal([]byte(value), &decoded); err != nil {
		t.Fatalf("decode value: %v", err)
	}
	if !sameEndpoint(decoded, e) {
		t.Errorf("decoded value = %+v, want %+v", decoded, e)
	}

	if len(got) != 1 {
		t.Fatalf("Apply returned %d records, want 1", len(got))
	}
	if got[0].Key != key || got[0].Revision != modRev || !sameEndpoint(got[0].Endpoint, e) {
		t.Errorf("Apply returned %+v, want key %q revision %d endpoint %+v", got[0], key, modRev, e)
	}
}

func TestListScope(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	p := f.prefix
	f.clear(t, p+"-x/")
	in := func(service, ns, pod string) string {
		e := ep(pod)
		e.Service, e.Namespace = service, ns
		return mustJSON(t, e)
	}
	revs := map[string]int64{}
	for _, kv := range []struct{ key, value string }{
		{p + "/a/ns/p1", in("a", "ns", "p1")},
		{p + "/a/ns/p2", in("a", "ns", "p2")},
		{p + "/a/other/p3", in("a", "other", "p3")},   // another namespace
		{p + "/a/ns2/p4", in("a", "ns2", "p4")},       // namespace sharing a prefix
		{p + "/ab/ns/p5", in("ab", "ns", "p5")},       // service sharing a prefix
		{p + "/a/ns", in("a", "ns", "")},              // the scope itself, not under it
		{p + "/a", in("a", "", "")},                   // the service key
		{p + "-x/a/ns/p6", in("a", "ns", "p6")},       // a store prefix sharing a prefix
		{p + "/a/ns/p7", in("a", "ns", "renamed-p7")}, // pod field disagrees with the key
	} {
		revs[kv.key] = f.put(t, kv.key, kv.value)
	}
	// p1 is written twice: Revision must be the latest ModRevision, not CreateRevision.
	revs[p+"/a/ns/p1"] = f.put(t, p+"/a/ns/p1", in("a", "ns", "p1"))

	tests := []struct {
		scope store.Scope
		pods  []string
	}{
		{store.Scope{Service: "a", Namespace: "ns"}, []string{"p1", "p2", "p7"}},
		{store.Scope{Service: "a", Namespace: "other"}, []string{"p3"}},
		{store.Scope{Service: "a", Namespace: "ns2"}, []string{"p4"}},
		{store.Scope{Service: "ab", Namespace: "ns"}, []string{"p5"}},
		{store.Scope{Service: "a", Namespace: "n"}, nil},
		{store.Scope{Service: "b", Namespace: "ns"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.scope.Service+"/"+tc.scope.Namespace, func(t *testing.T) {
			recs, err := f.store.List(ctx(t), tc.scope)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if recs == nil {
				t.Errorf("List returned nil, want an empty slice")
			}
			var pods []string
			for _, r := range recs {
				pods = append(pods, r.Pod)
				wantKey := p + "/" + tc.scope.Service + "/" + tc.scope.Namespace + "/" + r.Pod
				if r.Key != wantKey {
					t.Errorf("record %q: Key = %q, want %q", r.Pod, r.Key, wantKey)
				}
				if want := revs[r.Key]; r.Revision != want {
					t.Errorf("record %q: Revision = %d, want ModRevision %d", r.Pod, r.Revision, want)
				}
				if r.Owner != "reg-uid" || r.Address != "10.0.0.1" || r.Ports["http"] != 8080 {
					t.Errorf("record %q not decoded: %+v", r.Pod, r.Endpoint)
				}
			}
			if !slices.Equal(pods, tc.pods) {
				t.Errorf("List pods = %q, want %q", pods, tc.pods)
			}
		})
	}
}

func TestListUndecodable(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	values := map[string]string{
		"garbage":    "not json",
		"empty":      "",
		"truncated":  `{"owner":"reg-uid","pod":"truncated"`,
		"wrong-type": `{"owner":"reg-uid","address":"10.0.0.1","ports":"http"}`,
		"array":      `["reg-uid"]`,
	}
	revs := map[string]int64{}
	for pod, v := range values {
		revs[pod] = f.put(t, f.store.Key(scope, pod), v)
	}
	f.put(t, f.store.Key(scope, "good"), mustJSON(t, ep("good")))

	got := f.listByPod(t, scope)
	if len(got) != len(values)+1 {
		t.Fatalf("List returned %d records, want %d: %+v", len(got), len(values)+1, got)
	}
	if got["good"].Owner != "reg-uid" {
		t.Errorf("good record: Owner = %q, want reg-uid", got["good"].Owner)
	}
	for pod := range values {
		t.Run(pod, func(t *testing.T) {
			r, ok := got[pod]
			if !ok {
				t.Fatalf("undecodable record %q not listed", pod)
			}
			if r.Owner != "" {
				t.Errorf("Owner = %q, want empty (nobody owns an undecodable record)", r.Owner)
			}
			want := store.Record{Endpoint: store.Endpoint{Pod: pod}, Key: f.store.Key(scope, pod), Revision: revs[pod]}
			if !reflect.DeepEqual(r, want) {
				t.Errorf("record = %+v, want %+v", r, want)
			}
		})
	}
}

func TestApplyCreateConflictWritesNothing(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	existing := f.seed(t, "keep", "old")
	taken := f.store.Key(scope, "taken")
	foreign := `{"owner":"someone-else"}`
	takenRev := f.put(t, taken, foreign)
	before := f.keys(t)

	changes := store.Changes{
		Create: []store.Endpoint{ep("new-1"), ep("taken"), ep("new-2")},
		Update: []store.Update{{Old: existing["keep"], New: func() store.Endpoint { e := ep("keep"); e.Address = "10.9.9.9"; return e }()}},
		Delete: []store.Record{existing["old"]},
	}
	got, err := f.store.Apply(ctx(t), scope, changes)
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Apply error = %v, want ErrConflict", err)
	}
	if len(got) != 0 {
		t.Errorf("Apply returned %d records on conflict, want none", len(got))
	}
	if after := f.keys(t); !slices.Equal(after, before) {
		t.Errorf("keys after failed Apply = %q, want unchanged %q", after, before)
	}
	if v, rev, _ := f.get(t, taken); v != foreign || rev != takenRev {
		t.Errorf("conflicting key changed: %q@%d, want %q@%d", v, rev, foreign, takenRev)
	}
	if _, rev, _ := f.get(t, existing["keep"].Key); rev != existing["keep"].Revision {
		t.Errorf("update in the failed Apply was applied: revision %d, want %d", rev, existing["keep"].Revision)
	}
}

func TestApplyStaleRevision(t *testing.T) {
	moved := func(pod string) store.Endpoint { e := ep(pod); e.Address = "10.2.2.2"; return e }
	tests := []struct {
		name string
		// tamper changes the store behind the Store's back after it listed.
		tamper  func(t *testing.T, f fixture, key string)
		changes func(r store.Record) store.Changes
	}{
		{
			name:   "update after another writer changed the key",
			tamper: func(t *testing.T, f fixture, key string) { f.put(t, key, `{"owner":"reg-uid","address":"10.3.3.3"}`) },
			changes: func(r store.Record) store.Changes {
				return store.Changes{Update: []store.Update{{Old: r, New: moved(r.Pod)}}}
			},
		},
		{
			name:   "update after the key was deleted",
			tamper: func(t *testing.T, f fixture, key string) { f.del(t, key) },
			changes: func(r store.Record) store.Changes {
				return store.Changes{Update: []store.Update{{Old: r, New: moved(r.Pod)}}}
			},
		},
		{
			name:    "delete after another writer changed the key",
			tamper:  func(t *testing.T, f fixture, key string) { f.put(t, key, `{"owner":"reg-uid","address":"10.3.3.3"}`) },
			changes: func(r store.Record) store.Changes { return store.Changes{Delete: []store.Record{r}} },
		},
		{
			name: "delete after the key was deleted and recreated with the same value",
			tamper: func(t *testing.T, f fixture, key string) {
				v, _, _ := f.get(t, key)
				f.del(t, key)
				f.put(t, key, v)
			},
			changes: func(r store.Record) store.Changes { return store.Changes{Delete: []store.Record{r}} },
		},
		{
			name:   "stale update fails a fresh create in the same Apply",
			tamper: func(t *testing.T, f fixture, key string) { f.put(t, key, `{"owner":"reg-uid"}`) },
			changes: func(r store.Record) store.Changes {
				return store.Changes{
					Create: []store.Endpoint{ep("fresh")},
					Update: []store.Update{{Old: r, New: moved(r.Pod)}},
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, etcd.Options{})
			r := f.seed(t, "web-0")["web-0"]
			tc.tamper(t, f, r.Key)
			beforeKeys := f.keys(t)
			beforeValue, beforeRev, _ := f.get(t, r.Key)

			_, err := f.store.Apply(ctx(t), scope, tc.changes(r))
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("Apply error = %v, want ErrConflict", err)
			}
			if after := f.keys(t); !slices.Equal(after, beforeKeys) {
				t.Errorf("keys after failed Apply = %q, want %q", after, beforeKeys)
			}
			if v, rev, _ := f.get(t, r.Key); v != beforeValue || rev != beforeRev {
				t.Errorf("key changed by failed Apply: %q@%d, want %q@%d", v, rev, beforeValue, beforeRev)
			}
		})
	}
}

func TestApplyUpdateAndDelete(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	listed := f.seed(t, "web-0", "web-1", "web-2")

	upd := ep("web-0")
	upd.Address, upd.Ports = "10.5.5.5", map[string]int32{"http": 8081}
	got, err := f.store.Apply(ctx(t), scope, store.Changes{
		Update: []store.Update{{Old: listed["web-0"], New: upd}},
		Delete: []store.Record{listed["web-1"]},
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("Apply returned %d records, want 1 (deletes return none): %+v", len(got), got)
	}
	if got[0].Revision <= listed["web-0"].Revision {
		t.Errorf("returned revision %d not newer than %d", got[0].Revision, listed["web-0"].Revision)
	}
	if _, rev, _ := f.get(t, got[0].Key); got[0].Revision != rev {
		t.Errorf("returned revision %d, stored ModRevision %d", got[0].Revision, rev)
	}
	if !sameEndpoint(got[0].Endpoint, upd) || got[0].Key != listed["web-0"].Key {
		t.Errorf("returned record %+v, want %+v at %s", got[0], upd, listed["web-0"].Key)
	}

	now := f.listByPod(t, scope)
	if _, ok := now["web-1"]; ok {
		t.Errorf("web-1 not deleted")
	}
	if !sameEndpoint(now["web-0"].Endpoint, upd) || now["web-0"].Revision != got[0].Revision {
		t.Errorf("web-0 listed as %+v, want %+v at revision %d", now["web-0"], upd, got[0].Revision)
	}
	if !reflect.DeepEqual(now["web-2"], listed["web-2"]) {
		t.Errorf("untouched web-2 changed: %+v -> %+v", listed["web-2"], now["web-2"])
	}

	// The record as returned by Apply guards the next write: it is not stale.
	if _, err := f.store.Apply(ctx(t), scope, store.Changes{Delete: []store.Record{got[0]}}); err != nil {
		t.Fatalf("delete with the revision Apply returned: %v", err)
	}
	// ... while the one listed before the update is.
	if _, err := f.store.Apply(ctx(t), scope, store.Changes{Delete: []store.Record{listed["web-2"], listed["web-0"]}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete of an already-deleted record: error %v, want ErrConflict", err)
	}
	if _, ok := f.listByPod(t, scope)["web-2"]; !ok {
		t.Errorf("web-2 deleted by a failed Apply")
	}
}

func TestApplyNoChanges(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	f.seed(t, "web-0")
	before := f.revision(t)
	got, err := f.store.Apply(ctx(t), scope, store.Changes{})
	if err != nil || len(got) != 0 {
		t.Fatalf("Apply(no changes) = %v, %v; want no records, no error", got, err)
	}
	if after := f.revision(t); after != before {
		t.Errorf("empty Apply moved the store revision %d -> %d", before, after)
	}
}

func TestApplySplitsLargeChanges(t *testing.T) {
	t.Run("10 creates, 3 per transaction", func(t *testing.T) {
		f := newFixture(t, etcd.Options{MaxTxnOps: 3})
		var c store.Changes
		for i := range 10 {
			c.Create = append(c.Create, ep(fmt.Sprintf("web-%02d", i)))
		}
		before := f.revision(t)
		got, err := f.store.Apply(ctx(t), scope, c)
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		// The shared server's revision is global: a write of another test's leftover (a lease
		// revoked late) may move it too, so only "at least 4" is this test's; the revisions of
		// the records below prove exactly 4 transactions of 3, 3, 3 and 1.
		if after := f.revision(t); after-before < 4 {
			t.Errorf("store revision moved by %d, want at least 4 transactions", after-before)
		}
		if len(got) != 10 {
			t.Fatalf("Apply returned %d records, want 10", len(got))
		}
		listed := f.listByPod(t, scope)
		if len(listed) != 10 {
			t.Fatalf("listed %d records, want 10", len(listed))
		}
		perRev := map[int64]int{}
		for i, r := range got {
			if !sameEndpoint(r.Endpoint, c.Create[i]) {
				t.Errorf("record %d = %+v, want %+v (input order)", i, r.Endpoint, c.Create[i])
			}
			l, ok := listed[r.Pod]
			if !ok {
				t.Errorf("%s not stored", r.Pod)
				continue
			}
			if r.Revision != l.Revision || r.Key != l.Key {
				t.Errorf("%s: returned %s@%d, stored %s@%d", r.Pod, r.Key, r.Revision, l.Key, l.Revision)
			}
			perRev[r.Revision]++
		}
		var sizes []int
		for _, rev := range slices.Sorted(maps.Keys(perRev)) {
			sizes = append(sizes, perRev[rev])
		}
		if !slices.Equal(sizes, []int{3, 3, 3, 1}) {
			t.Errorf("writes per transaction = %v, want [3 3 3 1]", sizes)
		}
	})

	t.Run("mixed creates, updates and deletes", func(t *testing.T) {
		f := newFixture(t, etcd.Options{MaxTxnOps: 3})
		listed := f.seed(t, "u0", "u1", "u2", "d0", "d1", "d2", "d3")
		var c store.Changes
		for _, p := range []string{"u0", "u1", "u2"} {
			e := ep(p)
			e.Address = "10.7.7.7"
			c.Update = append(c.Update, store.Update{Old: listed[p], New: e})
		}
		for _, p := range []string{"d0", "d1", "d2", "d3"} {
			c.Delete = append(c.Delete, listed[p])
		}
		for _, p := range []string{"c0", "c1", "c2"} {
			c.Create = append(c.Create, ep(p))
		}
		got, err := f.store.Apply(ctx(t), scope, c)
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if len(got) != 6 {
			t.Errorf("Apply returned %d records, want 6", len(got))
		}
		now := f.listByPod(t, scope)
		pods := slices.Sorted(maps.Keys(now))
		if want := []string{"c0", "c1", "c2", "u0", "u1", "u2"}; !slices.Equal(pods, want) {
			t.Fatalf("stored pods = %q, want %q", pods, want)
		}
		for _, p := range []string{"u0", "u1", "u2"} {
			if now[p].Address != "10.7.7.7" {
				t.Errorf("%s not updated: %+v", p, now[p])
			}
		}
		for _, r := range got {
			if now[r.Pod].Revision != r.Revision {
				t.Errorf("%s: returned revision %d, stored %d", r.Pod, r.Revision, now[r.Pod].Revision)
			}
		}
	})
}

// TestConcurrentWritersFenced: two writers that listed the same revision race; exactly one
// update lands and the other gets ErrConflict.
func TestConcurrentWritersFenced(t *testing.T) {
	f := newFixture(t, etcd.Options{})
	r := f.seed(t, "web-0")["web-0"]
	other := etcd.New(newClient(t, requireServer(t)), etcd.Options{Prefix: f.prefix})

	a, b := ep("web-0"), ep("web-0")
	a.Address, b.Address = "10.0.0.10", "10.0.0.11"
	c := ctx(t)
	errs := make(chan error, 2)
	go func() {
		_, err := f.store.Apply(c, scope, store.Changes{Update: []store.Update{{Old: r, New: a}}})
		errs <- err
	}()
	go func() {
		_, err := other.Apply(c, scope, store.Changes{Update: []store.Update{{Old: r, New: b}}})
		errs <- err
	}()
	var ok, conflicts int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrConflict):
			conflicts++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || conflicts != 1 {
		t.Errorf("%d writes succeeded and %d conflicted, want 1 and 1", ok, conflicts)
	}
}

// TestStoppedServerTimesOut uses a dedicated etcd server, stopped mid-test, so that the
// shared one is not disturbed.
func TestStoppedServerTimesOut(t *testing.T) {
	requireServer(t)
	srv, err := etcdtest.Start(t.TempDir())
	if srv != nil {
		t.Cleanup(srv.Stop)
	}
	if err != nil {
		t.Fatalf("start dedicated etcd: %v", err)
	}
	const timeout = 500 * time.Millisecond
	const limit = 3 * time.Second
	prefix := "/t/" + t.Name()
	s := etcd.New(newClient(t, srv), etcd.Options{Prefix: prefix, Timeout: timeout})

	// Sanity: the store works while the server runs.
	written, err := s.Apply(context.Background(), scope, store.Changes{Create: []store.Endpoint{ep("web-0")}})
	if err != nil {
		t.Fatalf("Apply against running server: %v", err)
	}
	if _, err := s.List(context.Background(), scope); err != nil {
		t.Fatalf("List against running server: %v", err)
	}

	srv.Stop()

	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"List", func(c context.Context) error { _, err := s.List(c, scope); return err }},
		{"Apply create", func(c context.Context) error {
			_, err := s.Apply(c, scope, store.Changes{Create: []store.Endpoint{ep("web-1")}})
			return err
		}},
		{"Apply delete", func(c context.Context) error {
			_, err := s.Apply(c, scope, store.Changes{Delete: written})
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			start := time.Now()
			// context.Background: only the Store's own Timeout may bound the call.
			go func() { done <- c.call(context.Background()) }()
			select {
			case err := <-done:
				elapsed := time.Since(start)
				if err == nil {
					t.Fatalf("%s against a stopped server succeeded", c.name)
				}
				if errors.Is(err, store.ErrConflict) {
					t.Errorf("%s: error %v must not be ErrConflict (nothing was compared)", c.name, err)
				}
				if elapsed > limit {
					t.Errorf("%s took %s, want under %s (Timeout %s)", c.name, elapsed, limit, timeout)
				}
				if !strings.Contains(err.Error(), prefix+"/web/shop/") {
					t.Errorf("%s: error %q does not name the key prefix", c.name, err)
				}
				t.Logf("%s failed after %s: %v", c.name, elapsed.Round(time.Millisecond), err)
			case <-time.After(limit):
				t.Fatalf("%s did not return within %s (Timeout %s)", c.name, limit, timeout)
			}
		})
	}
}
