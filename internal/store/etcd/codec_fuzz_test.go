package etcd

import (
	"maps"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
)

// The seed corpora of these fuzz targets live in testdata/fuzz/<target>/ and run as normal
// tests in `make test`; `make fuzz` explores further (see the Makefile).

var fuzzScope = store.Scope{Service: "web", Namespace: "shop"}

// FuzzDecodeRecord feeds arbitrary keys and values, as another writer of the prefix could
// leave them, to the decoder. It must not panic; a record it calls owned must be one that a
// guarded write of Key(pod) addresses exactly, and that re-encodes to the same endpoint.
func FuzzDecodeRecord(f *testing.F) {
	s := New(nil, Options{})
	prefix := s.scopePrefix(fuzzScope)
	f.Add(prefix+"web-0", []byte(`{"pod":"web-0","owner":"uid-1","address":"10.0.0.1","ports":{"http":8080}}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		rec := decodeRecord(prefix, []byte(key), value, 7)
		if rec.Key != key || rec.Revision != 7 {
			t.Fatalf("record %+v lost its key or revision", rec)
		}
		if rec.Owner == "" {
			return
		}
		if got := s.Key(fuzzScope, rec.Pod); got != key {
			t.Fatalf("owned record of pod %q at key %q, but Key(pod) = %q: its writes would miss it", rec.Pod, key, got)
		}
		again := reencode(t, prefix, key, rec.Endpoint)
		if !sameEndpoint(again.Endpoint, rec.Endpoint) {
			t.Fatalf("re-encoded endpoint differs:\n%+v\n%+v", again.Endpoint, rec.Endpoint)
		}
	})
}

// FuzzEndpointRoundTrip encodes endpoints with arbitrary field values and decodes them back:
// what registrar writes, it must read back as the same endpoint with the same owner, or
// refuse to write it.
func FuzzEndpointRoundTrip(f *testing.F) {
	f.Add("web-0", "uid-1", "10.0.0.1", "node-a", "zone-a", "cluster", "owner-uid", "http", int32(8080), int64(1_700_000_000_000_000_000))
	f.Fuzz(func(t *testing.T, pod, uid, address, node, zone, cluster, owner, portName string, port int32, unixNano int64) {
		s := New(nil, Options{})
		ep := store.Endpoint{
			Service: fuzzScope.Service, Namespace: fuzzScope.Namespace, Pod: pod, UID: uid, Address: address,
			Ports: map[string]int32{portName: port}, Node: node, Zone: zone, Cluster: cluster, Owner: owner,
			RegisteredAt: time.Unix(0, unixNano).UTC(),
		}
		o, err := s.putOp(fuzzScope, &ep, clientv3.Cmp{}, clientv3.NoLease)
		if err != nil {
			if checkSegment("pod", pod) == nil && ep.RegisteredAt.Year() >= 0 && ep.RegisteredAt.Year() <= 9999 {
				t.Fatalf("encode %+v: %v", ep, err)
			}
			return
		}
		if checkSegment("pod", pod) != nil {
			t.Fatalf("pod %q is not one key segment but was encoded", pod)
		}
		key, value := string(o.op.KeyBytes()), o.op.ValueBytes()
		rec := decodeRecord(s.scopePrefix(fuzzScope), []byte(key), value, 1)
		if rec.Pod != pod {
			t.Fatalf("pod %q came back as %q from key %q", pod, rec.Pod, key)
		}
		if !allUTF8(uid, address, node, zone, cluster, owner, portName) {
			return // JSON replaces invalid UTF-8; Kubernetes names and IPs are ASCII
		}
		if !sameEndpoint(rec.Endpoint, ep) {
			t.Fatalf("round trip changed the endpoint:\nwrote %+v\nread  %+v", ep, rec.Endpoint)
		}
	})
}

// FuzzKey checks the key layout for arbitrary prefixes and names: a scope and pod the store
// accepts map to exactly {scope prefix}{pod}, which decodes back to the same pod.
func FuzzKey(f *testing.F) {
	f.Add("/registrar/services", "web", "shop", "web-0")
	f.Fuzz(func(t *testing.T, prefix, service, namespace, pod string) {
		s := New(nil, Options{Prefix: prefix})
		scope := store.Scope{Service: service, Namespace: namespace}
		if checkScope(scope) != nil || checkSegment("pod", pod) != nil {
			if _, err := s.ops(scope, store.Changes{Create: []store.Endpoint{{Pod: pod}}}, clientv3.NoLease); err == nil {
				t.Fatalf("ops accepted scope %+v, pod %q", scope, pod)
			}
			return
		}
		sp := s.scopePrefix(scope)
		key := s.Key(scope, pod)
		if key != sp+pod {
			t.Fatalf("Key(%+v, %q) = %q, want scope prefix %q + pod", scope, pod, key, sp)
		}
		if !strings.HasPrefix(sp, s.opts.Prefix) {
			t.Fatalf("scope prefix %q is outside the store prefix %q", sp, s.opts.Prefix)
		}
		if got := decodeRecord(sp, []byte(key), nil, 1).Pod; got != pod {
			t.Fatalf("key %q decodes to pod %q, want %q", key, got, pod)
		}
	})
}

func reencode(t *testing.T, prefix, key string, ep store.Endpoint) store.Record {
	t.Helper()
	value, err := encodeValue(&ep)
	if err != nil {
		t.Fatalf("re-encode %+v: %v", ep, err)
	}
	return decodeRecord(prefix, []byte(key), value, 1)
}

func sameEndpoint(a, b store.Endpoint) bool {
	return a.Service == b.Service && a.Namespace == b.Namespace && a.Pod == b.Pod && a.UID == b.UID &&
		a.Address == b.Address && maps.Equal(a.Ports, b.Ports) && a.Node == b.Node && a.Zone == b.Zone &&
		a.Cluster == b.Cluster && a.Owner == b.Owner && a.RegisteredAt.Equal(b.RegisteredAt)
}

func allUTF8(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
