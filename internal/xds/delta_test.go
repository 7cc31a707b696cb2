package xds_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/xds"
)

func deltaRecv(t *testing.T, st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) *discoveryv3.DeltaDiscoveryResponse {
	t.Helper()
	type result struct {
		r   *discoveryv3.DeltaDiscoveryResponse
		err error
	}
	ch := make(chan result, 1)
	go func() { r, err := st.Recv(); ch <- result{r, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.r
	case <-time.After(10 * time.Second):
		t.Fatal("no delta response within 10s")
	}
	return nil
}

// TestDeltaACKs: a delta (incremental) xDS client is followed like a state-of-the-world
// one: its ACK reports the publish it acknowledges (push lag, OnAck), its NACK is counted
// with its message, and the readiness gate's wait counts it as a subscriber.
func TestDeltaACKs(t *testing.T) {
	var mu sync.Mutex
	var acks []xds.Ack
	s := startServer(t, xds.Config{OnAck: func(a xds.Ack) { mu.Lock(); acks = append(acks, a); mu.Unlock() }})
	key := types.NamespacedName{Namespace: "ns1", Name: "orders"}
	s.Publish(registry("ns1", "orders", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "zone-a")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(dial(t, s)).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "delta-1"}
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{"orders.ns1"}}); err != nil {
		t.Fatal(err)
	}
	resp := deltaRecv(t, st)
	if len(resp.GetResources()) != 1 || resp.GetResources()[0].GetName() != "orders.ns1" {
		t.Fatalf("want orders.ns1, got %v", resp)
	}
	checkDeltaAssignment(t, s, resp, "orders.ns1", 1)
	if ok, n := s.Acknowledged(key, "a", time.Hour); ok || n != 1 {
		t.Fatalf("delta client received, not ACKed: Acknowledged = %v, %d; want false, 1", ok, n)
	}
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: resp.GetNonce()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { ok, _ := s.Acknowledged(key, "a", time.Hour); return ok }, "the delta ACK of pod a")
	mu.Lock()
	if len(acks) != 1 || acks[0].Node != "delta-1" || acks[0].Name != "orders.ns1" || acks[0].Nack != "" {
		t.Errorf("acks = %+v, want one ACK of orders.ns1 by delta-1", acks)
	}
	mu.Unlock()
	if s.PushLag(key) <= 0 {
		t.Error("no push lag measured from the delta ACK")
	}

	// A change, rejected: counted as a NACK with its message, and the gate keeps waiting.
	s.Publish(registry("ns1", "orders", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "zone-a"),
		pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "zone-a")))
	resp = deltaRecv(t, st)
	checkDeltaAssignment(t, s, resp, "orders.ns1", 2)
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: resp.GetNonce(),
		ErrorDetail: status.New(codes.InvalidArgument, "no thanks").Proto()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acks) == 2 }, "the delta NACK")
	mu.Lock()
	if acks[1].Nack != "no thanks" {
		t.Errorf("second answer = %+v, want the NACK", acks[1])
	}
	mu.Unlock()
	if ok, _ := s.Acknowledged(key, "b", time.Hour); ok {
		t.Error("a NACKed pod counts as acknowledged")
	}
	for _, c := range s.Clients() {
		if c.Node == "delta-1" && c.Nacks != 1 {
			t.Errorf("delta client: %d NACKs, want 1", c.Nacks)
		}
	}
}

// checkDeltaAssignment: the delta response carries the assignment the server published
// under name, with endpoints endpoints, as a client decodes it.
func checkDeltaAssignment(t *testing.T, s *xds.Server, resp *discoveryv3.DeltaDiscoveryResponse, name string, endpoints int) {
	t.Helper()
	if len(resp.GetResources()) != 1 {
		t.Fatalf("delta response with %d resources, want 1", len(resp.GetResources()))
	}
	var got endpointv3.ClusterLoadAssignment
	if err := resp.GetResources()[0].GetResource().UnmarshalTo(&got); err != nil {
		t.Fatalf("decode the delta response's assignment: %v", err)
	}
	n := 0
	for _, l := range got.GetEndpoints() {
		n += len(l.GetLbEndpoints())
	}
	if got.GetClusterName() != name || n != endpoints || !proto.Equal(&got, s.LoadAssignment(name)) {
		t.Fatalf("delta client decoded %v (%d endpoints), want the published %v (%d endpoints)", &got, n, s.LoadAssignment(name), endpoints)
	}
}
