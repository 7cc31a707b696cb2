package xds_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/xds"
)

// recvErr waits for the stream's next error (responses before it are skipped).
func recvErr(t *testing.T, st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the stream was not closed within 10s")
	}
	return nil
}

// TestRequestLimits: a request bigger than an xDS request needs to be (256 KiB), or naming
// more resources than a client subscribes to (10,000), closes its stream; other clients
// are served.
func TestRequestLimits(t *testing.T) {
	s := startServer(t, xds.Config{})
	s.Publish(registry("ns1", "orders", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "")))
	for _, tc := range []struct {
		name  string
		names []string
		code  codes.Code
	}{
		{"300 KiB of names", []string{strings.Repeat("x", 300<<10)}, codes.ResourceExhausted},
		{"20,000 names", func() []string {
			out := make([]string, 20000)
			for i := range out {
				out[i] = fmt.Sprintf("n%d", i)
			}
			return out
		}(), codes.ResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := rawStream(t, s)
			// A failed send means the stream ended: Recv tells its status.
			_ = st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "big"}, TypeUrl: resourcev3.EndpointType, ResourceNames: tc.names})
			if err := recvErr(t, st); status.Code(err) != tc.code {
				t.Fatalf("stream ended with %v, want %v", err, tc.code)
			}
		})
	}
	st := rawStream(t, s)
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "small"}, TypeUrl: resourcev3.EndpointType,
		ResourceNames: []string{"orders.ns1"}}); err != nil {
		t.Fatal(err)
	}
	if r := recvWithin(t, st); len(r.GetResources()) != 1 {
		t.Fatalf("a small request got %d resources, want 1", len(r.GetResources()))
	}
}

// TestStreamsPerPeer: one peer address opens at most 64 ADS streams at a time (over any
// number of connections); the next is refused, and a stream closed makes room.
func TestStreamsPerPeer(t *testing.T) {
	s := startServer(t, xds.Config{})
	s.Publish(registry("ns1", "orders", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "")))
	open := func(cc *grpc.ClientConn) (discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A stream the server refuses at once may end before the request is sent: Send then
		// returns io.EOF, and the stream's status is what Recv returns (gRPC's contract).
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "peer"}, TypeUrl: resourcev3.EndpointType,
			ResourceNames: []string{"orders.ns1"}}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		return st, cancel
	}
	var conns []*grpc.ClientConn
	for range 5 { // 16 streams per connection at most
		conns = append(conns, dial(t, s))
	}
	var first context.CancelFunc
	for i := range 64 {
		st, cancel := open(conns[i%len(conns)])
		recvWithin(t, st)
		if i == 0 {
			first = cancel
		}
	}
	extra, _ := open(conns[4])
	if err := recvErr(t, extra); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the 65th stream of one peer ended with %v, want ResourceExhausted", err)
	}
	first()
	waitFor(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conns[0]).StreamAggregatedResources(ctx)
		if err != nil {
			return false
		}
		if st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "peer"}, TypeUrl: resourcev3.EndpointType,
			ResourceNames: []string{"orders.ns1"}}) != nil {
			return false
		}
		_, err = st.Recv()
		return err == nil
	}, "a stream once one of the peer's streams closed")
}

// TestPlaintextOnlyOnLoopback: without TLS, the server listens on a loopback address only;
// any other address is refused at start with an error naming the flag that allows it.
func TestPlaintextOnlyOnLoopback(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		s := xds.New(xds.Config{BindAddress: addr, Log: testr.New(t)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Start(ctx) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "--xds-allow-insecure") {
				t.Errorf("%s: Start = %v, want an error naming --xds-allow-insecure", addr, err)
			}
			cancel()
			continue
		case <-s.Listening():
			t.Errorf("%s: a plaintext server listens on %s", addr, s.Addr())
		case <-time.After(10 * time.Second):
			t.Errorf("%s: Start neither failed nor listened", addr)
		}
		cancel()
		if err := <-done; err != nil {
			t.Logf("%s: Start after cancel: %v", addr, err)
		}
	}
}

// TestAllowInsecure: with AllowInsecure a plaintext server listens on every interface.
func TestAllowInsecure(t *testing.T) {
	s, stopped, err := runServer(t, xds.Config{BindAddress: ":0", AllowInsecure: true})
	select {
	case <-s.Listening():
	case <-stopped:
		t.Fatalf("server did not start: %v", *err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not listen")
	}
}

// TestDeltaSubscriptionLimit: a delta stream's subscriptions add up; beyond 10,000 names of
// a type the stream is closed.
func TestDeltaSubscriptionLimit(t *testing.T) {
	s := startServer(t, xds.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(dial(t, s)).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(from int) []string {
		out := make([]string, 6000)
		for i := range out {
			out[i] = fmt.Sprintf("n%d", from+i)
		}
		return out
	}
	_ = st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta-big"}, TypeUrl: resourcev3.EndpointType,
		ResourceNamesSubscribe: batch(0)})
	_ = st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: batch(6000)})
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("stream ended with %v, want ResourceExhausted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a delta stream subscribed to 12,000 names was not closed")
	}
}
