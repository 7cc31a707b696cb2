package xds_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	grpcxds "google.golang.org/grpc/xds"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/xds"
)

// hostBackend is a real gRPC server standing in for whatever pod has its address: it answers
// UnaryCall with the address it listens on.
type hostBackend struct {
	testgrpc.UnimplementedTestServiceServer
	addr string
}

func (b *hostBackend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Hostname: b.addr}, nil
}

// startHostBackends starts one backend on each of the loopback IPs given, all on one port.
func startHostBackends(t *testing.T, ips ...string) int32 {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", ips[0]+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		listeners := []net.Listener{l}
		for _, ip := range ips[1:] {
			li, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, port))
			if err != nil {
				break
			}
			listeners = append(listeners, li)
		}
		if len(listeners) < len(ips) {
			for _, li := range listeners {
				_ = li.Close()
			}
			continue
		}
		for _, li := range listeners {
			srv := grpc.NewServer()
			testgrpc.RegisterTestServiceServer(srv, &hostBackend{addr: li.Addr().String()})
			go func() { _ = srv.Serve(li) }()
			t.Cleanup(srv.Stop)
		}
		return int32(port)
	}
	t.Fatal("no common free port for the backends")
	return 0
}

// grpcXDSClient is a grpc-go channel to xds:///target with its own xDS client (node id)
// bootstrapped to the server s.
func grpcXDSClient(t *testing.T, s *xds.Server, node, target string) testgrpc.TestServiceClient {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": %q}
	}`, s.Addr(), node)
	builder, err := grpcxds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///"+target, grpc.WithResolvers(builder), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// reached makes n calls and returns the backends that answered (errors as "error: ...").
func reached(c testgrpc.TestServiceClient, n int) map[string]int {
	out := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		cancel()
		if err != nil {
			out["error: "+err.Error()]++
			continue
		}
		out[resp.GetHostname()]++
	}
	return out
}

// TestDuplicateAddressIsPublishedOnce: a DRAINING pod and a new pod that reuses its IP and
// port land in one ClusterLoadAssignment; grpc-go rejects an assignment that repeats an
// address (all of it: the client keeps its old endpoints). The address is published once,
// for the live pod, and a real gRPC xDS client accepts the assignment and uses the rest of it.
func TestDuplicateAddressIsPublishedOnce(t *testing.T) {
	var mu sync.Mutex
	var nacks []string
	s := startServer(t, xds.Config{OnAck: func(a xds.Ack) {
		if a.Nack != "" {
			mu.Lock()
			nacks = append(nacks, a.Nack)
			mu.Unlock()
		}
	}})
	port := startHostBackends(t, "127.0.0.1", "127.0.0.2")
	at := func(name string, state v1beta1.EndpointState, ip string) publish.Pod {
		p := publish.Pod{Name: name, State: state}
		if state == v1beta1.EndpointRegistered {
			p.Endpoint = store.Endpoint{Pod: name, Address: ip, Ports: map[string]int32{"grpc": port}}
		}
		return p
	}
	reg := func(pods ...publish.Pod) publish.Registry {
		r := registry("ns1", "orders", pods...)
		r.Ports = []string{"grpc"}
		return r
	}
	s.Publish(reg(at("old", v1beta1.EndpointRegistered, "127.0.0.1")))
	c := grpcXDSClient(t, s, "dup-client", "orders.ns1")
	one := fmt.Sprintf("127.0.0.1:%d", port)
	two := fmt.Sprintf("127.0.0.2:%d", port)
	waitFor(t, func() bool { return reached(c, 1)[one] == 1 }, "the client to reach "+one)

	// old terminates (DRAINING at 127.0.0.1), new reuses its address, other starts on .2.
	s.Publish(reg(at("old", v1beta1.EndpointDraining, ""), at("new", v1beta1.EndpointRegistered, "127.0.0.1"),
		at("other", v1beta1.EndpointRegistered, "127.0.0.2")))
	want := fmt.Sprintf("map[new:HEALTHY %s zone= w=1 other:HEALTHY %s zone= w=1]", one, two)
	if got := fmt.Sprint(health(s.LoadAssignment("orders.ns1"))); got != want {
		t.Errorf("published %s, want %s (the address once, for the live pod)", got, want)
	}
	waitFor(t, func() bool { return reached(c, 10)[two] > 0 }, "the client to use the new assignment (reach "+two+")")
	mu.Lock()
	defer mu.Unlock()
	if len(nacks) > 0 {
		t.Errorf("the client rejected responses: %v", nacks)
	}
}
