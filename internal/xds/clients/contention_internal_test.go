package clients

import (
	"context"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"google.golang.org/protobuf/types/known/anypb"
)

// blockingSub is a stream's EDS subscription whose lookup waits until release closes: a
// stream busy with its own subscription.
type blockingSub struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingSub) Has(string) bool {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return true
}

// within fails the test when f does not return within 10 s.
func within(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s waited on another stream's bookkeeping", what)
	}
}

// TestStreamsDoNotWaitForEachOther: the tracker's bookkeeping of one stream does not hold
// up another's. At fleet scale (make bench-xds-fleet, 10,000 clients at 100 changes/s) one
// tracker-wide mutex taken by every request and response of every stream was most of the
// xDS server's lock contention (its mutex profile: ~60 % of the time goroutines waited). Here
// the readiness gate's count (WaitingFor) is stuck on a busy stream's subscription, and
// another stream's response and ACK, and a publish's stamp, still go through.
func TestStreamsDoNotWaitForEachOther(t *testing.T) {
	a := NewTracker(Config{Prefix: "p.", RequestRate: 1000, RequestBurst: 1000, Log: logr.Discard()})
	for _, id := range []int64{1, 2} {
		if err := a.Open(context.Background(), id, ""); err != nil {
			t.Fatal(err)
		}
	}
	busy := &blockingSub{entered: make(chan struct{}, 1), release: make(chan struct{})}
	a.ServeEDS(1, busy)
	a.Stamp(resourcev3.EndpointType, "svc", 1, time.Now())

	counted := make(chan int, 1)
	go func() { counted <- a.WaitingFor("svc", 1) }()
	<-busy.entered
	defer func() {
		close(busy.release)
		<-counted
	}()

	// Stream 2: its request, the response to it and its ACK.
	req := &discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"svc"}}
	within(t, "stream 2's first request", func() error { return a.Request(2, req) })
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: resourcev3.EndpointType, VersionInfo: "p.1", Nonce: "1",
		Resources: []*anypb.Any{{TypeUrl: resourcev3.EndpointType, Value: []byte("\x0a\x03svc")}}}
	within(t, "stream 2's response", func() error { a.Response(context.Background(), 2, req, resp); return nil })
	ack := &discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"svc"}, VersionInfo: "p.1", ResponseNonce: "1"}
	within(t, "stream 2's ACK", func() error { return a.Request(2, ack) })
	within(t, "a publish's stamp", func() error { a.Stamp(resourcev3.EndpointType, "svc", 2, time.Now()); return nil })
	within(t, "a new stream", func() error { return a.Open(context.Background(), 3, "") })
}
