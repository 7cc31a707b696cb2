package xds

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr/testr"
	ktypes "k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/store"
)

func reg(i int) publish.Registry {
	name := fmt.Sprintf("r%d", i)
	return publish.Registry{Key: ktypes.NamespacedName{Namespace: "ns", Name: name}, UID: ktypes.UID(name), Service: name,
		Ports: []string{"grpc"}, Pods: []publish.Pod{{Name: "p", State: v1beta1.EndpointRegistered,
			Endpoint: store.Endpoint{Pod: "p", Address: "10.0.0.1", Ports: map[string]int32{"grpc": 9090}}}}}
}

// TestBookkeepingShrinks: what the server keeps per registry, per stream and per name is
// forgotten when the registry, the stream or the name goes: the publish history the ACKs
// are attributed with (per published resource, at most historyLen stamps each), a stream's
// acknowledged versions of names no longer published, a closed stream's state, and the
// registries seen before the server listens (needed until then only).
func TestBookkeepingShrinks(t *testing.T) {
	s := New(Config{BindAddress: "127.0.0.1:0", Log: testr.New(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-s.Listening():
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not listen")
	}

	// A stream that acknowledged every registry's assignment.
	if err := s.acks.open(ctx, 1, ""); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if res := s.Publish(reg(i)); !res.OK() {
			t.Fatalf("publish: %+v", res)
		}
	}
	s.acks.mu.Lock()
	acked := map[string]uint64{}
	for i := range n {
		acked[ResourceName(fmt.Sprintf("r%d", i), "ns")] = 1
	}
	s.acks.streams[1].edsAcked = acked
	s.acks.mu.Unlock()

	for i := range n {
		s.Unpublish(reg(i).Key)
	}
	s.acks.mu.Lock()
	for _, typ := range TypeURLs {
		if h := len(s.acks.history[typ]); h != 0 {
			t.Errorf("%s: publish history of %d names kept after every registry was unpublished", shortType(typ), h)
		}
	}
	if left := len(s.acks.streams[1].edsAcked); left != 0 {
		t.Errorf("the stream keeps the acknowledged versions of %d names no longer published", left)
	}
	s.acks.mu.Unlock()
	s.acks.closed(1, nil)
	s.acks.mu.Lock()
	if left := len(s.acks.streams); left != 0 {
		t.Errorf("%d streams kept after they closed", left)
	}
	s.acks.mu.Unlock()

	s.mu.Lock()
	if left := len(s.seen); left != 0 {
		t.Errorf("%d registries kept as seen after the server listens", left)
	}
	s.mu.Unlock()

	// A registry that stays keeps its history, bounded.
	r := reg(0)
	for i := range 3 * historyLen {
		r.Pods[0].Endpoint.Address = fmt.Sprintf("10.0.1.%d", i)
		s.Publish(r)
	}
	s.acks.mu.Lock()
	if h := len(s.acks.history[resourcev3.EndpointType][ResourceName("r0", "ns")]); h != historyLen {
		t.Errorf("%d stamps kept for a live assignment, want %d", h, historyLen)
	}
	s.acks.mu.Unlock()
}
