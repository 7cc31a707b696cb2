package xds

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	ktypes "k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/xds/resource"
)

func reg(i int) publish.Registry {
	name := fmt.Sprintf("r%d", i)
	return publish.Registry{Key: ktypes.NamespacedName{Namespace: "ns", Name: name}, UID: ktypes.UID(name), Service: name,
		Ports: []string{"grpc"}, Pods: []publish.Pod{{Name: "p", State: v1beta1.EndpointRegistered,
			Endpoint: store.Endpoint{Pod: "p", Address: "10.0.0.1", Ports: map[string]int32{"grpc": 9090}}}}}
}

// TestBookkeepingShrinks: what the server keeps per registry is forgotten when the
// registry goes: the publish history of each of its resources in the ACK tracker (how the
// tracker bounds and forgets it: internal/xds/clients, TestBookkeepingShrinks), and the
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

	const n = 50
	for i := range n {
		if res := s.Publish(reg(i)); !res.OK() {
			t.Fatalf("publish: %+v", res)
		}
	}
	for _, typ := range TypeURLs {
		if h := s.acks.Stamped(typ); h != n {
			t.Errorf("%s: publish history of %d names, want %d", resource.ShortType(typ), h, n)
		}
	}
	for i := range n {
		s.Unpublish(reg(i).Key)
	}
	for _, typ := range TypeURLs {
		if h := s.acks.Stamped(typ); h != 0 {
			t.Errorf("%s: publish history of %d names kept after every registry was unpublished", resource.ShortType(typ), h)
		}
	}

	s.mu.Lock()
	if left := len(s.seen); left != 0 {
		t.Errorf("%d registries kept as seen after the server listens", left)
	}
	s.mu.Unlock()
}
