package discovery

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/pkg/wire"
)

// applyClient is a Client with the snapshot of n instances of one service (keys in order)
// and no store: apply and list are driven by hand.
func applyClient(t testing.TB, n int) *Client {
	t.Helper()
	c := &Client{cfg: Config{}, now: time.Now, synced: make(chan struct{})}
	c.health.byKey = map[string]*instanceHealth{}
	list := make([]Instance, n)
	for i := range list {
		list[i] = testInstance(t, fmt.Sprintf("/registry/web/ns/web-%05d", i), 1)
	}
	c.snap.Store(newSnapshot(list, 1))
	c.rev = 1
	return c
}

func testInstance(t testing.TB, key string, rev int64) Instance {
	t.Helper()
	inst, err := DecodeInstance(key, testValue(t, key), rev)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func testValue(t testing.TB, key string) []byte {
	t.Helper()
	pod := key[strings.LastIndex(key, "/")+1:]
	v, err := wire.Encode(&wire.Endpoint{Service: "web", Namespace: "ns", Pod: pod, Address: "10.0.0.1",
		Ports: map[string]int32{"http": 8080}, Node: "node-1", Zone: "zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func putEvent(t testing.TB, key string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: testValue(t, key), ModRevision: rev}}
}

func deleteEvent(key string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

// One watch event costs the one copy of the list a new immutable snapshot needs, not a
// rebuild of the whole service (a map of every instance, then a sort): with 1,000 callers
// of a 2,000-pod service rolling, the rebuild was most of the callers' CPU (bench/rollout).
func TestApplyOneEventCostsOneCopy(t *testing.T) {
	const n = 2000
	c := applyClient(t, n)
	rev := int64(1)
	events := make([][]*clientv3.Event, 50)
	for i := range events {
		rev++
		events[i] = []*clientv3.Event{putEvent(t, fmt.Sprintf("/registry/web/ns/web-%05d", i*37%n), rev)}
	}
	// The fewest bytes of 5 batches of 10 events: a goroutine left by another test that
	// allocates meanwhile can only add to a batch, not take from it.
	perEvent := math.Inf(1)
	for b := range 5 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, ev := range events[b*10 : b*10+10] {
			c.apply(ev)
		}
		runtime.ReadMemStats(&after)
		perEvent = min(perEvent, float64(after.TotalAlloc-before.TotalAlloc)/10)
	}
	oneCopy := float64(n) * float64(unsafe.Sizeof(Instance{}))
	if perEvent > 1.25*oneCopy {
		t.Fatalf("applying one event to %d instances allocates %.0f bytes, %.1f× the list (%.0f bytes): more than the one copy a snapshot needs",
			n, perEvent, perEvent/oneCopy, oneCopy)
	}
}

// Any sequence of puts, deletes and undecodable values, in batches, leaves the snapshot the
// full rebuild gives: every live key once, sorted, at its last value.
func TestApplyMatchesRebuild(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		c := applyClient(t, 50)
		want := map[string]Instance{}
		for _, inst := range c.snap.Load().instances {
			want[inst.Key] = inst
		}
		rev := int64(1)
		for range 100 {
			batch := make([]*clientv3.Event, 1+rng.IntN(4))
			for i := range batch {
				rev++
				key := fmt.Sprintf("/registry/web/ns/web-%05d", rng.IntN(80))
				switch rng.IntN(5) {
				case 0, 1:
					batch[i] = deleteEvent(key, rev)
					delete(want, key)
				case 2:
					batch[i] = &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte("{not json"), ModRevision: rev}}
					delete(want, key)
				default:
					batch[i] = putEvent(t, key, rev)
					want[key] = testInstance(t, key, rev)
				}
			}
			c.apply(batch)
			got := c.snap.Load()
			keys := slices.Sorted(maps.Keys(want))
			if len(got.instances) != len(keys) {
				t.Fatalf("seed %d: %d instances, want %d", seed, len(got.instances), len(keys))
			}
			for i, k := range keys {
				if got.instances[i].Key != k || got.instances[i].Revision != want[k].Revision {
					t.Fatalf("seed %d: instance %d is %s@%d, want %s@%d", seed, i, got.instances[i].Key, got.instances[i].Revision, k, want[k].Revision)
				}
			}
			if got.rev != rev {
				t.Fatalf("seed %d: snapshot revision %d, want %d", seed, got.rev, rev)
			}
		}
	}
}

// BenchmarkApplyOneEvent is one watch event (a changed instance) applied to a 2,000-instance
// service: what each caller pays per pod transition during a rollout.
func BenchmarkApplyOneEvent(b *testing.B) {
	const n = 2000
	c := applyClient(b, n)
	events := make([][]*clientv3.Event, 256)
	for i := range events {
		events[i] = []*clientv3.Event{putEvent(b, fmt.Sprintf("/registry/web/ns/web-%05d", i*37%n), 0)}
	}
	b.ReportAllocs()
	rev := int64(1)
	for i := 0; b.Loop(); i++ {
		rev++
		ev := events[i%len(events)]
		ev[0].Kv.ModRevision = rev
		c.apply(ev)
	}
}
