package zookeeper_test

import (
	"fmt"
	"testing"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/zookeeper"
)

// TestLargeInstancesSplitByBytes: a multi is bounded by the server's jute.maxbuffer (1 MB by
// default), not only by its operation count. Instances of about 10 kB each, 128 of which
// exceed it, all land in one Apply and all go in the next, read back with a raw client.
func TestLargeInstancesSplitByBytes(t *testing.T) {
	f := newFixture(t, nil, zookeeper.Options{})
	const n = 300
	eps := make([]store.Endpoint, 0, n)
	for i := range n {
		e := ep(fmt.Sprintf("web-%03d", i))
		e.Ports = map[string]int32{}
		for p := range 230 {
			e.Ports[fmt.Sprintf("port-%03d", p)] = int32(10000 + p)
		}
		eps = append(eps, e)
	}
	if _, err := f.store.Apply(ctx(t), scope, store.Changes{Create: eps}); err != nil {
		t.Fatalf("Apply of %d creates: %v", n, err)
	}
	if got := len(f.children(t, "web")); got != n {
		t.Fatalf("ZooKeeper holds %d instances, want %d", got, n)
	}
	size := len(f.get(t, f.base+"/web/shop.web-000"))
	t.Logf("%d bytes per instance: %d kB in %d of them", size, size*zookeeper.DefaultMaxOps>>10, zookeeper.DefaultMaxOps)
	if size*zookeeper.DefaultMaxOps <= 1<<20 {
		t.Fatalf("instances of %d bytes: %d of them do not exceed jute.maxbuffer, the test proves nothing", size, zookeeper.DefaultMaxOps)
	}
	del := make([]store.Record, 0, n)
	for _, r := range f.list(t, scope) {
		del = append(del, r)
	}
	if _, err := f.store.Apply(ctx(t), scope, store.Changes{Delete: del}); err != nil {
		t.Fatalf("Apply of %d deletes: %v", len(del), err)
	}
	if got := f.children(t, "web"); len(got) != 0 {
		t.Errorf("%d instances left after deleting all", len(got))
	}
}
