package clients

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr/testr"

	"github.com/registrar-dev/registrar/internal/xds/resource"
)

// TestBookkeepingShrinks: what the tracker keeps per resource and per stream is forgotten
// when the resource or the stream goes: the publish history the ACKs are attributed with
// (per published resource, at most historyLen stamps each), a stream's acknowledged
// versions of names no longer published, and a closed stream's state. (That the server
// forgets every type of an unpublished registry: internal/xds, TestBookkeepingShrinks.)
func TestBookkeepingShrinks(t *testing.T) {
	a := NewTracker(Config{Prefix: "p.", RequestRate: 50, RequestBurst: 100, Log: testr.New(t)})
	// A stream that acknowledged every published assignment.
	if err := a.Open(context.Background(), 1, ""); err != nil {
		t.Fatal(err)
	}
	const n = 50
	name := func(i int) string { return fmt.Sprintf("r%d.ns", i) }
	now := time.Now()
	seq := uint64(0)
	for i := range n {
		for _, typ := range resource.TypeURLs {
			seq++
			a.Stamp(typ, name(i), seq, now)
		}
	}
	acked := map[string]uint64{}
	for i := range n {
		acked[name(i)] = 1
	}
	st := a.stream(1)
	st.mu.Lock()
	st.edsAcked = acked
	st.mu.Unlock()

	for i := range n {
		for _, typ := range resource.TypeURLs {
			a.Forget(typ, name(i))
		}
	}
	for _, typ := range resource.TypeURLs {
		if h := a.Stamped(typ); h != 0 {
			t.Errorf("%s: publish history of %d names kept after every resource was forgotten", resource.ShortType(typ), h)
		}
	}
	st.mu.Lock()
	if left := len(st.edsAcked); left != 0 {
		t.Errorf("the stream keeps the acknowledged versions of %d names no longer published", left)
	}
	st.mu.Unlock()
	a.Closed(1, nil)
	if left := len(a.allStreams()); left != 0 {
		t.Errorf("%d streams kept after they closed", left)
	}

	// A resource that stays keeps its history, bounded.
	for range 3 * historyLen {
		seq++
		a.Stamp(resourcev3.EndpointType, name(0), seq, now)
	}
	a.histMu.RLock()
	if h := len(a.history[resourcev3.EndpointType][name(0)]); h != historyLen {
		t.Errorf("%d stamps kept for a live assignment, want %d", h, historyLen)
	}
	a.histMu.RUnlock()
}
