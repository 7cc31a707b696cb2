package coredns_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/coredns"
	"github.com/registrar-dev/registrar/test/support/corednstest"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

const zone = "registrar.test"

// The etcd and CoreDNS processes shared by the tests of this package; setupErr says why they
// are not running. Tests that need them fail (never skip) through requireServers.
var (
	etcdServer *etcdtest.Server
	dnsServer  *corednstest.Server
	setupErr   error
	nsCounter  atomic.Int32
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "registrar-coredns-store-test-")
	if err != nil {
		setupErr = err
		return m.Run()
	}
	defer os.RemoveAll(dir)
	if etcdServer, setupErr = etcdtest.Start(dir); setupErr != nil {
		etcdServer = nil
		return m.Run()
	}
	defer etcdServer.Stop()
	if dnsServer, setupErr = corednstest.Start(dir, zone, coredns.DefaultPrefix, etcdServer.Endpoint()); setupErr != nil {
		dnsServer = nil
		return m.Run()
	}
	defer dnsServer.Stop()
	return m.Run()
}

func requireServers(t *testing.T) {
	t.Helper()
	if etcdServer == nil || dnsServer == nil {
		t.Fatalf("test servers unavailable: %v; these tests need real etcd and CoreDNS binaries: "+
			"run hack/envtest-assets.sh and hack/coredns.sh, then e.g. "+
			"ETCD_BIN=$PWD/bin/k8s/v1.37.2-etcdv3.7.3/etcd go test ./internal/store/coredns/", setupErr)
	}
}

// fixture is a Store writing a namespace of its own, and a raw client of the same etcd.
type fixture struct {
	store *coredns.Store
	raw   *clientv3.Client
	scope store.Scope
	root  string // the key prefix of the scope
}

func newFixture(t *testing.T, opts coredns.Options) fixture {
	t.Helper()
	requireServers(t)
	opts.Zone = zone
	f := fixture{
		store: coredns.New(newClient(t), opts),
		raw:   newClient(t),
		scope: store.Scope{Service: "web", Namespace: fmt.Sprintf("ns%d-%d", os.Getpid(), nsCounter.Add(1))},
	}
	f.root = "/skydns/test/registrar/" + f.scope.Namespace + "/web/"
	if _, err := f.raw.Delete(ctx(t), f.root, clientv3.WithPrefix()); err != nil {
		t.Fatalf("clear %s: %v", f.root, err)
	}
	return f
}

func newClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := etcdServer.Client()
	if err != nil {
		t.Fatalf("etcd client: %v", err)
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

func (f fixture) ep(pod, ip string) store.Endpoint {
	return store.Endpoint{
		Service: f.scope.Service, Namespace: f.scope.Namespace, Pod: pod, UID: "uid-" + pod,
		Address: ip, Ports: map[string]int32{"http": 8080, "grpc": 9000},
		Node: "node-a", Owner: "reg-uid", RegisteredAt: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
	}
}

func (f fixture) apply(t *testing.T, c store.Changes) []store.Record {
	t.Helper()
	written, err := f.store.Apply(ctx(t), f.scope, c)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return written
}

func (f fixture) list(t *testing.T) map[string]store.Record {
	t.Helper()
	recs, err := f.store.List(ctx(t), f.scope)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]store.Record{}
	for _, r := range recs {
		out[r.Pod] = r
	}
	return out
}

// keys lists every key under the scope, with its value.
func (f fixture) keys(t *testing.T) map[string]string {
	t.Helper()
	resp, err := f.raw.Get(ctx(t), f.root, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("raw list: %v", err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

func (f fixture) put(t *testing.T, key, value string) {
	t.Helper()
	if _, err := f.raw.Put(ctx(t), key, value); err != nil {
		t.Fatalf("raw put %s: %v", key, err)
	}
}

func (f fixture) name(labels ...string) string {
	return strings.Join(append(labels, f.scope.Service, f.scope.Namespace, zone), ".") + "."
}

// answers queries CoreDNS and returns the answer section as sorted strings without TTLs,
// the TTLs, and the response code.
func answers(t *testing.T, name string, qtype uint16) (rrs []string, ttls []uint32, rcode int) {
	t.Helper()
	r, err := dnsServer.Query(name, qtype)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, rr := range r.Answer {
		ttls = append(ttls, rr.Header().Ttl)
		switch v := rr.(type) {
		case *dns.A:
			rrs = append(rrs, v.A.String())
		case *dns.AAAA:
			rrs = append(rrs, v.AAAA.String())
		case *dns.SRV:
			rrs = append(rrs, fmt.Sprintf("%d %d %d %s", v.Priority, v.Weight, v.Port, v.Target))
		default:
			rrs = append(rrs, rr.String())
		}
	}
	sort.Strings(rrs)
	return rrs, ttls, r.Rcode
}

func TestLayout(t *testing.T) {
	f := newFixture(t, coredns.Options{})
	e := f.ep("web-0", "10.0.0.1")
	written := f.apply(t, store.Changes{Create: []store.Endpoint{e}})

	keys := f.keys(t)
	want := []string{f.root + "_tcp/_grpc/web-0", f.root + "_tcp/_http/web-0"}
	got := make([]string, 0, len(keys))
	for k := range keys {
		got = append(got, k)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("keys = %q, want %q", got, want)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(keys[f.root+"_tcp/_http/web-0"]), &fields); err != nil {
		t.Fatalf("value is not JSON: %v", err)
	}
	meta, _ := fields["registrar"].(map[string]any)
	delete(fields, "registrar")
	wantFields := map[string]any{"host": "10.0.0.1", "port": float64(8080), "priority": float64(10), "weight": float64(10), "ttl": float64(5)}
	if !reflect.DeepEqual(fields, wantFields) {
		t.Errorf("SkyDNS fields = %v, want %v", fields, wantFields)
	}
	if meta["owner"] != "reg-uid" || meta["pod"] != "web-0" || meta["uid"] != "uid-web-0" {
		t.Errorf("registrar metadata = %v, want owner reg-uid, pod web-0, uid uid-web-0", meta)
	}
	listed := f.list(t)["web-0"]
	if len(written) != 1 || written[0].Revision != listed.Revision || written[0].Key != listed.Key {
		t.Errorf("Apply returned %+v, List has %+v", written, listed)
	}
	if !reflect.DeepEqual(listed.Ports, e.Ports) || listed.Address != e.Address || listed.Owner != e.Owner || listed.UID != e.UID {
		t.Errorf("listed endpoint %+v, want %+v", listed.Endpoint, e)
	}
}

// TestDNSAnswers registers, deregisters and drains through a real CoreDNS.
func TestDNSAnswers(t *testing.T) {
	f := newFixture(t, coredns.Options{})
	a, b := f.ep("web-0", "10.0.0.1"), f.ep("web-1", "10.0.0.2")
	written := f.apply(t, store.Changes{Create: []store.Endpoint{a, b}})

	rrs, ttls, _ := answers(t, f.name(), dns.TypeA)
	if !slices.Equal(rrs, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Fatalf("A %s = %q, want both pods", f.name(), rrs)
	}
	for _, ttl := range ttls {
		if ttl != 5 {
			t.Errorf("A answer TTL = %d, want 5 (the default)", ttl)
		}
	}
	rrs, _, _ = answers(t, f.name("_http", "_tcp"), dns.TypeSRV)
	wantSRV := []string{"10 50 8080 " + f.name("web-0", "_http", "_tcp"), "10 50 8080 " + f.name("web-1", "_http", "_tcp")}
	if !slices.Equal(rrs, wantSRV) {
		t.Errorf("SRV = %q, want %q", rrs, wantSRV)
	}
	if rrs, _, _ := answers(t, f.name("web-1", "_grpc", "_tcp"), dns.TypeA); !slices.Equal(rrs, []string{"10.0.0.2"}) {
		t.Errorf("A of the SRV target = %q, want 10.0.0.2", rrs)
	}

	// Deregister web-0 (unready): its address leaves the answers.
	f.apply(t, store.Changes{Delete: []store.Record{written[0]}})
	if rrs, _, _ := answers(t, f.name(), dns.TypeA); !slices.Equal(rrs, []string{"10.0.0.2"}) {
		t.Errorf("A after deregistering web-0 = %q, want only 10.0.0.2", rrs)
	}
	// Drain the last one: the name is gone.
	f.apply(t, store.Changes{Delete: []store.Record{written[1]}})
	if rrs, _, rcode := answers(t, f.name(), dns.TypeA); len(rrs) != 0 || rcode != dns.RcodeNameError {
		t.Errorf("A after draining = %q rcode %s, want NXDOMAIN", rrs, dns.RcodeToString[rcode])
	}
	if keys := f.keys(t); len(keys) != 0 {
		t.Errorf("keys left after draining: %q", keys)
	}
}

func TestTTLAndNoPorts(t *testing.T) {
	f := newFixture(t, coredns.Options{TTL: 7 * time.Second})
	e := f.ep("web-0", "fd00::1")
	e.Ports = nil
	f.apply(t, store.Changes{Create: []store.Endpoint{e}})
	if keys := f.keys(t); len(keys) != 1 || keys[f.root+"web-0"] == "" {
		t.Fatalf("keys = %q, want the one port-less key %sweb-0", keys, f.root)
	}
	rrs, ttls, _ := answers(t, f.name(), dns.TypeAAAA)
	if !slices.Equal(rrs, []string{"fd00::1"}) || !slices.Equal(ttls, []uint32{7}) {
		t.Errorf("AAAA = %q TTLs %v, want fd00::1 with TTL 7", rrs, ttls)
	}
}

func TestUpdatePortsAndAddress(t *testing.T) {
	f := newFixture(t, coredns.Options{})
	old := f.apply(t, store.Changes{Create: []store.Endpoint{f.ep("web-0", "10.0.0.1")}})[0]
	next := f.ep("web-0", "10.0.0.9")
	next.Ports = map[string]int32{"http": 8081, "metrics": 9090}
	f.apply(t, store.Changes{Update: []store.Update{{Old: old, New: next}}})

	keys := f.keys(t)
	if len(keys) != 2 || keys[f.root+"_tcp/_http/web-0"] == "" || keys[f.root+"_tcp/_metrics/web-0"] == "" {
		t.Fatalf("keys after update = %q, want _http and _metrics only", keys)
	}
	if rrs, _, _ := answers(t, f.name("_http", "_tcp"), dns.TypeSRV); len(rrs) != 1 || !strings.Contains(rrs[0], " 8081 ") {
		t.Errorf("SRV _http = %q, want port 8081", rrs)
	}
	listed := f.list(t)["web-0"]
	if listed.Address != "10.0.0.9" || !reflect.DeepEqual(listed.Ports, next.Ports) {
		t.Errorf("listed %+v, want address 10.0.0.9 ports %v", listed.Endpoint, next.Ports)
	}
}

func TestOwnership(t *testing.T) {
	f := newFixture(t, coredns.Options{})
	foreign := `{"host":"10.9.9.9","port":80}`
	f.put(t, f.root+"_tcp/_http/taken", foreign)                   // a record of someone else at our key
	f.put(t, f.root+"_udp/_dns/web-0", `{"host":"10.9.9.8"}`)      // outside our layout
	f.put(t, f.root+"deep/er/key", `{"host":"10.9.9.7"}`)          // outside our layout
	f.put(t, f.root+"other", `{"host":"10.9.9.6","registrar":{}}`) // metadata without owner

	listed := f.list(t)
	if len(listed) != 2 || listed["taken"].Owner != "" || listed["other"].Owner != "" {
		t.Fatalf("List = %+v, want taken and other, both unowned", listed)
	}
	_, err := f.store.Apply(ctx(t), f.scope, store.Changes{Create: []store.Endpoint{f.ep("new", "10.0.0.1"), f.ep("taken", "10.0.0.2")}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create over a foreign record: error %v, want ErrConflict", err)
	}
	keys := f.keys(t)
	if len(keys) != 4 || keys[f.root+"_tcp/_http/taken"] != foreign {
		t.Errorf("a failed Apply changed keys: %q", keys)
	}
	// A pod whose keys disagree about the owner is nobody's.
	mine := f.apply(t, store.Changes{Create: []store.Endpoint{f.ep("mixed", "10.0.0.3")}})[0]
	f.put(t, f.root+"_tcp/_grpc/mixed", `{"host":"10.0.0.3","port":9000,"registrar":{"owner":"other-uid"}}`)
	if got := f.list(t)["mixed"]; got.Owner != "" {
		t.Errorf("pod with keys of two owners listed with owner %q, want none", got.Owner)
	}
	if _, err := f.store.Apply(ctx(t), f.scope, store.Changes{Delete: []store.Record{mine}}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("delete after another owner wrote one key: error %v, want ErrConflict", err)
	}
}

func TestStaleRevision(t *testing.T) {
	tests := []struct {
		name    string
		tamper  func(t *testing.T, f fixture)
		changes func(f fixture, r store.Record) store.Changes
	}{
		{"update after one key changed",
			func(t *testing.T, f fixture) { f.put(t, f.root+"_tcp/_grpc/web-0", `{"host":"10.3.3.3"}`) },
			func(f fixture, r store.Record) store.Changes {
				return store.Changes{Update: []store.Update{{Old: r, New: f.ep("web-0", "10.1.1.1")}}}
			}},
		{"delete after one key was deleted",
			func(t *testing.T, f fixture) { _, _ = f.raw.Delete(ctx(t), f.root+"_tcp/_http/web-0") },
			func(f fixture, r store.Record) store.Changes { return store.Changes{Delete: []store.Record{r}} }},
		{"delete after a stray port-less key appeared",
			func(t *testing.T, f fixture) { f.put(t, f.root+"web-0", `{"host":"10.3.3.3"}`) },
			func(f fixture, r store.Record) store.Changes { return store.Changes{Delete: []store.Record{r}} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, coredns.Options{})
			r := f.apply(t, store.Changes{Create: []store.Endpoint{f.ep("web-0", "10.0.0.1")}})[0]
			tc.tamper(t, f)
			before := f.keys(t)
			if _, err := f.store.Apply(ctx(t), f.scope, tc.changes(f, r)); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("Apply error = %v, want ErrConflict", err)
			}
			if after := f.keys(t); !reflect.DeepEqual(after, before) {
				t.Errorf("failed Apply changed keys:\n%q\n->\n%q", before, after)
			}
		})
	}
}

func TestSplitKeepsPodsWhole(t *testing.T) {
	f := newFixture(t, coredns.Options{MaxTxnOps: 5}) // 2 keys (2 puts, 2 compares) per pod
	var c store.Changes
	for i := range 7 {
		c.Create = append(c.Create, f.ep(fmt.Sprintf("web-%d", i), fmt.Sprintf("10.0.0.%d", i+1)))
	}
	written := f.apply(t, c)
	revs := map[int64]int{}
	for _, r := range written {
		revs[r.Revision]++
	}
	if len(revs) != 4 {
		t.Errorf("7 pods in %d transactions, want 4 (2 pods of 2 keys each per 5 operations)", len(revs))
	}
	if rrs, _, _ := answers(t, f.name(), dns.TypeA); len(rrs) != 7 {
		t.Errorf("A = %q, want 7 addresses", rrs)
	}
	listed := f.list(t)
	for _, r := range written {
		if listed[r.Pod].Revision != r.Revision {
			t.Errorf("%s: returned revision %d, listed %d", r.Pod, r.Revision, listed[r.Pod].Revision)
		}
	}
}

// TestDeregistrationLatency measures, server side, how long after a deregistration starts
// CoreDNS stops answering with the pod: the store write plus CoreDNS's read of etcd (the
// etcd plugin has no cache). Callers add their resolver's cache, bounded by the TTL.
func TestDeregistrationLatency(t *testing.T) {
	f := newFixture(t, coredns.Options{})
	const rounds = 20
	var took []time.Duration
	for i := range rounds {
		r := f.apply(t, store.Changes{Create: []store.Endpoint{f.ep("web-0", "10.0.0.1")}})[0]
		if rrs, _, _ := answers(t, f.name(), dns.TypeA); len(rrs) != 1 {
			t.Fatalf("round %d: A = %q before deregistering", i, rrs)
		}
		start := time.Now()
		f.apply(t, store.Changes{Delete: []store.Record{r}})
		for {
			rrs, _, _ := answers(t, f.name(), dns.TypeA)
			if len(rrs) == 0 {
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("round %d: still answering %q 30 s after deregistering", i, rrs)
			}
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("deregistration -> gone from DNS (server side, %d rounds): p50 %s, p90 %s, max %s",
		rounds, took[rounds/2].Round(time.Microsecond), took[rounds*9/10].Round(time.Microsecond), took[rounds-1].Round(time.Microsecond))
}

// TestScopeTTL: the scope's TTL wins over the Store's, and records of another TTL are listed
// as differing so that planning rewrites them.
func TestScopeTTL(t *testing.T) {
	f := newFixture(t, coredns.Options{})
	f.scope.TTL = 9 * time.Second
	f.apply(t, store.Changes{Create: []store.Endpoint{f.ep("web-0", "10.0.0.1")}})
	if _, ttls, _ := answers(t, f.name(), dns.TypeA); !slices.Equal(ttls, []uint32{9}) {
		t.Fatalf("A TTLs = %v, want [9] (the scope's)", ttls)
	}
	f.scope.TTL = 3 * time.Second
	listed := f.list(t)["web-0"]
	desired := f.ep("web-0", "10.0.0.1")
	if plan.Same(listed.Endpoint, desired) {
		t.Fatalf("a record with TTL 9 listed as the same as desired under TTL 3: %+v", listed.Endpoint)
	}
	p := plan.Compute("reg-uid", map[string]store.Endpoint{"web-0": desired}, map[string]store.Record{"web-0": listed}, time.Now())
	f.apply(t, p.Changes)
	if _, ttls, _ := answers(t, f.name(), dns.TypeA); !slices.Equal(ttls, []uint32{3}) {
		t.Errorf("A TTLs after the TTL change = %v, want [3]", ttls)
	}
	if listed := f.list(t)["web-0"]; !plan.Same(listed.Endpoint, desired) {
		t.Errorf("rewritten record still differs: %+v", listed.Endpoint)
	}
}
