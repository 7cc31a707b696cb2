package xds_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/xds"
)

// TestGateWaitsForWhatIsServed: the readiness gate's wait for ACKs counts a client as
// subscribed to a ClusterLoadAssignment exactly when the server serves it that assignment.
//   - a state-of-the-world client that named resources and then sends an empty request has
//     unsubscribed from everything (a gRPC client that closed its last channel): it is not
//     served, and not waited for;
//   - a state-of-the-world client that asks for "*" is served everything, and waited for;
//   - a delta client in the legacy wildcard (no names yet) stays a wildcard when it
//     unsubscribes "*" without subscribing to anything (as go-control-plane serves it), and
//     is waited for.
func TestGateWaitsForWhatIsServed(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns1", Name: "orders"}
	// serve starts a server publishing orders.ns1 with pod a; publishPod adds a pod.
	serve := func(t *testing.T) (*xds.Server, func(string)) {
		s := startServer(t, xds.Config{})
		pods := []publish.Pod{pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "zone-a")}
		s.Publish(registry("ns1", "orders", pods...))
		return s, func(name string) {
			pods = append(pods, pod(name, v1beta1.EndpointRegistered, fmt.Sprintf("10.0.0.%d", len(pods)+1), "zone-a"))
			s.Publish(registry("ns1", "orders", pods...))
		}
	}
	send := func(t *testing.T, st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, typ string, names []string,
		last *discoveryv3.DiscoveryResponse) {
		t.Helper()
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "sotw"}, TypeUrl: typ, ResourceNames: names,
			VersionInfo: last.GetVersionInfo(), ResponseNonce: last.GetNonce()}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("an empty request after names unsubscribes", func(t *testing.T) {
		s, publishPod := serve(t)
		gone := rawStream(t, s)
		send(t, gone, resourcev3.EndpointType, []string{"orders.ns1"}, nil)
		r := recvWithin(t, gone)
		send(t, gone, resourcev3.EndpointType, []string{"orders.ns1"}, r)
		send(t, gone, resourcev3.EndpointType, []string{}, r)
		// A request of another type on the same stream: once it is answered, the server has
		// handled the ones before it (a stream's requests are handled in order).
		send(t, gone, resourcev3.ClusterType, []string{"orders.ns1"}, nil)
		if c := recvWithin(t, gone); c.GetTypeUrl() != resourcev3.ClusterType {
			t.Fatalf("want the Cluster response, got %s", c.GetTypeUrl())
		}
		publishPod("b")
		if ok, n := s.Acknowledged(key, "b", time.Hour); !ok || n != 0 {
			t.Fatalf("the only client unsubscribed: Acknowledged(b) = %v, %d; want true, 0", ok, n)
		}
	})

	t.Run("a request of \"*\" is a wildcard", func(t *testing.T) {
		s, publishPod := serve(t)
		star := rawStream(t, s)
		send(t, star, resourcev3.EndpointType, []string{"*"}, nil)
		r := recvWithin(t, star)
		if len(r.GetResources()) != 1 {
			t.Fatalf("a client of \"*\" got %d assignments, want 1", len(r.GetResources()))
		}
		publishPod("b")
		if ok, n := s.Acknowledged(key, "b", time.Hour); ok || n != 1 {
			t.Fatalf("a client of \"*\" has not acknowledged b: Acknowledged(b) = %v, %d; want false, 1", ok, n)
		}
		send(t, star, resourcev3.EndpointType, []string{"*"}, r)
		r = recvWithin(t, star)
		send(t, star, resourcev3.EndpointType, []string{"*"}, r)
		waitFor(t, func() bool { ok, _ := s.Acknowledged(key, "b", time.Hour); return ok }, "the ACK of b by the client of \"*\"")
	})

	t.Run("a delta legacy wildcard that unsubscribes \"*\" alone stays a wildcard", func(t *testing.T) {
		s, publishPod := serve(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		delta, err := discoveryv3.NewAggregatedDiscoveryServiceClient(dial(t, s)).DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := delta.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta"}, TypeUrl: resourcev3.EndpointType}); err != nil {
			t.Fatal(err)
		}
		d := deltaRecv(t, delta)
		if err := delta.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResponseNonce: d.GetNonce(),
			ResourceNamesUnsubscribe: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
		publishPod("b")
		if d = deltaRecv(t, delta); len(d.GetResources()) != 1 {
			t.Fatalf("the delta client got %d assignments after b, want 1 (it is still served)", len(d.GetResources()))
		}
		if ok, n := s.Acknowledged(key, "b", time.Hour); ok || n != 1 {
			t.Fatalf("the delta client is served b and has not acknowledged it: Acknowledged(b) = %v, %d; want false, 1", ok, n)
		}
	})
}
