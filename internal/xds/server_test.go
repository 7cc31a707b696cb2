package xds_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	adsclient "github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/xds"
)

// startServer runs an xDS server on a free loopback port until the test ends and waits
// until it listens.
func startServer(t *testing.T, cfg xds.Config) *xds.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.BindAddress = l.Addr().String()
	_ = l.Close()
	s, stopped, startErr := runServer(t, cfg)
	select {
	case <-s.Listening():
	case <-stopped:
		t.Fatalf("server did not start: %v", *startErr)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not listen")
	}
	return s
}

// runServer starts a server (on any loopback port unless cfg names one) without waiting for
// it to listen; stopped is closed when Start returns, with its error in *err. The test's
// cleanup stops it and fails on that error.
func runServer(t *testing.T, cfg xds.Config) (s *xds.Server, stopped <-chan struct{}, err *error) {
	t.Helper()
	if cfg.BindAddress == "" {
		cfg.BindAddress = "127.0.0.1:0"
	}
	cfg.Log = testr.New(t)
	s = xds.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var startErr error
	go func() { startErr = s.Start(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if startErr != nil {
			t.Errorf("server: %v", startErr)
		}
	})
	return s, done, &startErr
}

func dial(t *testing.T, s *xds.Server) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func pod(name string, state v1beta1.EndpointState, ip, zone string) publish.Pod {
	p := publish.Pod{Name: name, State: state}
	if state == v1beta1.EndpointRegistered || state == v1beta1.EndpointWarmingUp {
		p.Endpoint = store.Endpoint{Pod: name, Address: ip, Zone: zone, Ports: map[string]int32{"http": 8080, "grpc": 9090}}
	}
	return p
}

func registry(ns, name string, pods ...publish.Pod) publish.Registry {
	return publish.Registry{Key: types.NamespacedName{Namespace: ns, Name: name}, UID: types.UID("uid-" + name),
		Service: name, Ports: []string{"http", "grpc"}, Pods: pods}
}

// fetchCLA reads responses until one holds a ClusterLoadAssignment, acknowledging each.
func fetchCLA(t *testing.T, c adsclient.ADSClient) *endpointv3.ClusterLoadAssignment {
	t.Helper()
	type result struct {
		resp *adsclient.Response
		err  error
	}
	ch := make(chan result, 1)
	go func() { r, err := c.Fetch(); ch <- result{r, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("fetch: %v", r.err)
		}
		if err := c.Ack(); err != nil {
			t.Fatalf("ack: %v", err)
		}
		if len(r.resp.Resources) != 1 {
			t.Fatalf("want 1 resource per response (one changed registry), got %d", len(r.resp.Resources))
		}
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := r.resp.Resources[0].UnmarshalTo(cla); err != nil {
			t.Fatal(err)
		}
		return cla
	case <-time.After(10 * time.Second):
		t.Fatal("no response within 10s")
	}
	return nil
}

// health maps pod (from endpoint metadata) to health and zone.
func health(cla *endpointv3.ClusterLoadAssignment) map[string]string {
	out := map[string]string{}
	for _, loc := range cla.GetEndpoints() {
		for _, ep := range loc.GetLbEndpoints() {
			name := ep.GetMetadata().GetFilterMetadata()[xds.MetadataNamespace].GetFields()["pod"].GetStringValue()
			addr := ep.GetEndpoint().GetAddress().GetSocketAddress()
			out[name] = fmt.Sprintf("%s %s:%d zone=%s w=%d", ep.GetHealthStatus(), addr.GetAddress(), addr.GetPortValue(),
				loc.GetLocality().GetZone(), ep.GetLoadBalancingWeight().GetValue())
		}
	}
	return out
}

func TestADSClientFollowsVerdicts(t *testing.T) {
	var mu sync.Mutex
	var acks []xds.Ack
	s := startServer(t, xds.Config{OnAck: func(a xds.Ack) { mu.Lock(); acks = append(acks, a); mu.Unlock() }})
	s.Publish(registry("ns1", "orders",
		pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "zone-a"),
		pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "zone-b"),
		pod("c", v1beta1.EndpointWarmingUp, "10.0.0.3", "zone-a"),
		pod("d", v1beta1.EndpointUnready, "", "")))

	c := adsclient.NewADSClient(context.Background(), &corev3.Node{Id: "ads-1"}, resourcev3.EndpointType)
	if err := c.InitConnect(dial(t, s)); err != nil {
		t.Fatal(err)
	}
	cla := fetchCLA(t, c)
	if cla.GetClusterName() != "orders.ns1" || len(cla.GetEndpoints()) != 2 {
		t.Fatalf("want orders.ns1 with one locality per zone (2), got %v", cla)
	}
	want := map[string]string{"a": "HEALTHY 10.0.0.1:9090 zone=zone-a w=1", "b": "HEALTHY 10.0.0.2:9090 zone=zone-b w=1"}
	if got := health(cla); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v (warming and unready pods absent, port named grpc)", got, want)
	}

	// a terminates: DRAINING at the address it had; c finishes warming up.
	s.Publish(registry("ns1", "orders",
		pod("a", v1beta1.EndpointDraining, "", ""),
		pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "zone-b"),
		pod("c", v1beta1.EndpointRegistered, "10.0.0.3", "zone-a")))
	want = map[string]string{"a": "DRAINING 10.0.0.1:9090 zone=zone-a w=1", "b": "HEALTHY 10.0.0.2:9090 zone=zone-b w=1",
		"c": "HEALTHY 10.0.0.3:9090 zone=zone-a w=1"}
	if got := health(fetchCLA(t, c)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// a is gone; a pod that starts out Draining (never published) stays absent.
	s.Publish(registry("ns1", "orders",
		pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "zone-b"),
		pod("c", v1beta1.EndpointRegistered, "10.0.0.3", "zone-a"),
		pod("e", v1beta1.EndpointDraining, "", "")))
	want = map[string]string{"b": "HEALTHY 10.0.0.2:9090 zone=zone-b w=1", "c": "HEALTHY 10.0.0.3:9090 zone=zone-a w=1"}
	if got := health(fetchCLA(t, c)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// An identical publish sends nothing.
	before := s.LoadAssignment("orders.ns1")
	s.Publish(registry("ns1", "orders",
		pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "zone-b"),
		pod("c", v1beta1.EndpointRegistered, "10.0.0.3", "zone-a")))
	if s.LoadAssignment("orders.ns1") != before {
		t.Fatal("an unchanged publish replaced the ClusterLoadAssignment")
	}
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= 3
	}, "three ACKs")
	mu.Lock()
	var slowest time.Duration
	for _, a := range acks {
		if a.Node != "ads-1" || a.Name != "orders.ns1" || a.Nack != "" || a.At.Before(a.PublishedAt) {
			t.Errorf("unexpected ack %+v", a)
		}
		slowest = max(slowest, a.At.Sub(a.PublishedAt))
	}
	mu.Unlock()
	// The drain advice's xDS lag is the slowest measured push of the registry.
	key := types.NamespacedName{Namespace: "ns1", Name: "orders"}
	if got := s.PushLag(key); got != slowest || got <= 0 {
		t.Errorf("PushLag = %v, want the slowest ACK's %v", got, slowest)
	}

	// Unpublish: the registry is deleted.
	s.Unpublish(key)
	if s.LoadAssignment("orders.ns1") != nil {
		t.Fatal("ClusterLoadAssignment left after Unpublish")
	}
	if got := s.PushLag(key); got != 0 {
		t.Errorf("PushLag after Unpublish = %v, want 0", got)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNackIsCountedAndNotResent(t *testing.T) {
	var mu sync.Mutex
	var nacks []xds.Ack
	s := startServer(t, xds.Config{OnAck: func(a xds.Ack) {
		if a.Nack != "" {
			mu.Lock()
			nacks = append(nacks, a)
			mu.Unlock()
		}
	}})
	s.Publish(registry("ns1", "pay", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "")))
	c := adsclient.NewADSClient(context.Background(), &corev3.Node{Id: "nacker"}, resourcev3.EndpointType)
	if err := c.InitConnect(dial(t, s)); err != nil {
		t.Fatal(err)
	}
	fetchCLA(t, c) // acknowledged
	s.Publish(registry("ns1", "pay", pod("a", v1beta1.EndpointRegistered, "10.0.0.9", "")))
	if _, err := c.Fetch(); err != nil {
		t.Fatal(err)
	}
	if err := c.Nack("do not like it"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		for _, cl := range s.Clients() {
			if cl.Node == "nacker" && cl.Nacks == 1 {
				return true
			}
		}
		return false
	}, "the NACK to be counted")
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(nacks) > 0 }, "the NACK hook")
	mu.Lock()
	if len(nacks) != 1 || nacks[0].Nack != "do not like it" || nacks[0].Node != "nacker" {
		t.Fatalf("nack hook: %+v", nacks)
	}
	mu.Unlock()
	// No error storm: the rejected version is not sent again until something changes.
	got := make(chan error, 1)
	go func() { _, err := c.Fetch(); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("a response followed the NACK without a change (err %v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	s.Publish(registry("ns1", "pay", pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "")))
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next change was not sent after a NACK")
	}
}

// A client rejecting its very first response asks again with no version: it must not get
// the same content back at once (and again on every NACK).
func TestFirstResponseNackIsNotResent(t *testing.T) {
	s := startServer(t, xds.Config{})
	s.Publish(registry("ns1", "pay", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "")))
	c := adsclient.NewADSClient(context.Background(), &corev3.Node{Id: "first-nacker"}, resourcev3.EndpointType)
	if err := c.InitConnect(dial(t, s)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(); err != nil {
		t.Fatal(err)
	}
	if err := c.Nack("no"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := c.Fetch(); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("the rejected content was sent again (err %v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	s.Publish(registry("ns1", "pay", pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "")))
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next change was not sent")
	}
}

// rawStream opens an ADS stream on which the test sends and receives by hand.
func rawStream(t *testing.T, s *xds.Server) discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(dial(t, s)).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func recvWithin(t *testing.T, st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient) *discoveryv3.DiscoveryResponse {
	t.Helper()
	type result struct {
		r   *discoveryv3.DiscoveryResponse
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
		t.Fatal("no response within 10s")
	}
	return nil
}

func TestUnknownNamesGetEmptyAnswers(t *testing.T) {
	s := startServer(t, xds.Config{})
	s.Publish(registry("ns1", "known", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "")))
	st := rawStream(t, s)
	node := &corev3.Node{Id: "curious"}
	last := map[string]*discoveryv3.DiscoveryResponse{}
	for _, typ := range xds.TypeURLs {
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typ, ResourceNames: []string{"nope.ns1"}}); err != nil {
			t.Fatal(err)
		}
		resp := recvWithin(t, st)
		if resp.GetTypeUrl() != typ || len(resp.GetResources()) != 0 {
			t.Fatalf("%s: want an empty answer, got %d resources", typ, len(resp.GetResources()))
		}
		last[typ] = resp
	}
	// The known name is served on the same stream.
	lds := last[resourcev3.ListenerType]
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.ListenerType, ResourceNames: []string{"known.ns1"},
		VersionInfo: lds.GetVersionInfo(), ResponseNonce: lds.GetNonce()}); err != nil {
		t.Fatal(err)
	}
	resp := recvWithin(t, st)
	l := &listenerv3.Listener{}
	if len(resp.GetResources()) != 1 || resp.GetResources()[0].UnmarshalTo(l) != nil || l.GetName() != "known.ns1" || l.GetApiListener() == nil {
		t.Fatalf("want the api_listener known.ns1, got %v", resp)
	}
}

// A client that never reads its stream must not delay publishes or other clients: the server
// sends each stream at most one response per type and waits for its request before the next,
// and a publish only marks a stream's changed names and wakes it without blocking (sotw.go).
func TestStuckClientDoesNotDelayOthers(t *testing.T) {
	s := startServer(t, xds.Config{})
	big := func(gen int) publish.Registry {
		pods := make([]publish.Pod, 0, 2000)
		for i := range 2000 {
			pods = append(pods, pod(fmt.Sprintf("p-%d-%d", gen, i), v1beta1.EndpointRegistered,
				fmt.Sprintf("10.%d.%d.%d", gen%200, i/250, i%250), fmt.Sprintf("z%d", i%3)))
		}
		return registry("ns1", "big", pods...)
	}
	s.Publish(big(0))
	stuck := rawStream(t, s)
	if err := stuck.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "stuck"}, TypeUrl: resourcev3.EndpointType}); err != nil {
		t.Fatal(err)
	}
	// It never reads: its first response (~150 kB, beyond HTTP/2's initial 64 kB window)
	// blocks its stream's sender, and it never acknowledges, so it gets no further watch.
	good := adsclient.NewADSClient(context.Background(), &corev3.Node{Id: "good"}, resourcev3.EndpointType)
	if err := good.InitConnect(dial(t, s)); err != nil {
		t.Fatal(err)
	}
	fetchCLA(t, good)
	start := time.Now()
	const gens = 15
	for gen := 1; gen <= gens; gen++ {
		t0 := time.Now()
		s.Publish(big(gen))
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("publish %d took %v with a stuck client connected", gen, d)
		}
		// The good client reads and acknowledges every push.
		cla := fetchCLA(t, good)
		if n := len(health(cla)); n != 2000 {
			t.Fatalf("gen %d: %d endpoints", gen, n)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("%d pushes took %v with a stuck client connected", gens, d)
	}
	stuckSeen := false
	for _, c := range s.Clients() {
		stuckSeen = stuckSeen || c.Node == "stuck"
	}
	if !stuckSeen {
		t.Fatal("the stuck client's stream is gone; the test proves nothing")
	}
	t.Logf("%d pushes of 2000 endpoints to the good client in %v with a stuck client connected", gens, time.Since(start))
}

func TestInvalidAndConflictingNamesAreNotPublished(t *testing.T) {
	s := xds.New(xds.Config{Log: testr.New(t)})
	res := s.Publish(publish.Registry{Key: types.NamespacedName{Namespace: "ns1", Name: "api.v2"}, UID: "u1", Service: "api.v2",
		Ports: []string{"grpc"}, Pods: []publish.Pod{pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "")}})
	if res.Reason != v1beta1.ReasonInvalidXDSResourceName || s.LoadAssignment("api.v2.ns1") != nil {
		t.Fatalf("dotted service name: %+v", res)
	}
	if res := s.Publish(registry("ns1", "orders", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", ""))); !res.OK() {
		t.Fatalf("valid registry: %+v", res)
	}
	second := registry("ns1", "orders-v2", pod("b", v1beta1.EndpointRegistered, "10.0.0.2", ""))
	second.Service = "orders"
	if res := s.Publish(second); res.Reason != v1beta1.ReasonXDSResourceNameConflict {
		t.Fatalf("second registry of the same service: %+v", res)
	}
	if got := health(s.LoadAssignment("orders.ns1")); len(got) != 1 || got["a"] == "" {
		t.Fatalf("the first registry's endpoints were replaced: %v", got)
	}
	if res := s.Publish(registry("ns1", "noports")); !res.OK() {
		t.Fatalf("%+v", res)
	}
	np := registry("ns1", "noports2")
	np.Ports = nil
	if res := s.Publish(np); res.Reason != v1beta1.ReasonNoPorts {
		t.Fatalf("no ports: %+v", res)
	}
}

func TestVersionPrefixPerProcess(t *testing.T) {
	a, b := xds.New(xds.Config{}), xds.New(xds.Config{})
	if a.VersionPrefix() == b.VersionPrefix() || a.VersionPrefix() == "" {
		t.Fatalf("prefixes %q and %q", a.VersionPrefix(), b.VersionPrefix())
	}
}

// TestSlowStartWeights: a registered pod's slow-start weight is its load_balancing_weight
// and, as each endpoint of a slow-start registry is its own locality (sub_zone = pod: gRPC
// honours locality weights, not endpoint weights), its locality's weight; a weight step is
// one changed ClusterLoadAssignment. A registry without slow start publishes weight 1 and
// one locality per zone.
func TestSlowStartWeights(t *testing.T) {
	var published []xds.Published
	s := xds.New(xds.Config{Log: testr.New(t), OnPublished: func(p xds.Published) { published = append(published, p) }})
	weighted := func(p publish.Pod, w int32) publish.Pod { p.Endpoint.Weight = w; return p }
	reg := registry("ns1", "orders",
		weighted(pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "zone-a"), 100),
		weighted(pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "zone-a"), 10),
		pod("c", v1beta1.EndpointRegistered, "10.0.0.3", "zone-b"))
	s.Publish(reg)
	weights := func() (map[string]uint32, map[string]uint32) {
		eps, locs := map[string]uint32{}, map[string]uint32{}
		for _, loc := range s.LoadAssignment("orders.ns1").GetEndpoints() {
			locs[loc.GetLocality().GetZone()+"/"+loc.GetLocality().GetSubZone()] = loc.GetLoadBalancingWeight().GetValue()
			for _, ep := range loc.GetLbEndpoints() {
				eps[ep.GetMetadata().GetFilterMetadata()[xds.MetadataNamespace].GetFields()["pod"].GetStringValue()] = ep.GetLoadBalancingWeight().GetValue()
			}
		}
		return eps, locs
	}
	eps, locs := weights()
	if eps["a"] != 100 || eps["b"] != 10 || eps["c"] != 1 || len(locs) != 3 || locs["zone-a/a"] != 100 || locs["zone-a/b"] != 10 || locs["zone-b/c"] != 1 {
		t.Fatalf("endpoint weights %v, locality weights %v; want a=100 b=10 c=1, one locality per endpoint of its weight", eps, locs)
	}
	reg.Pods[1].Endpoint.Weight = 19 // the next step
	s.Publish(reg)
	s.Publish(reg) // unchanged: nothing
	if eps, locs = weights(); eps["b"] != 19 || locs["zone-a/b"] != 19 {
		t.Fatalf("after the step: endpoint weights %v, locality weights %v", eps, locs)
	}
	if len(published) != 2 {
		t.Errorf("%d ClusterLoadAssignments published, want 2 (initial, one step)", len(published))
	}
	// Without slow start (no weights): one locality per zone, every weight 1.
	plain := registry("ns1", "plain", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "zone-a"), pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "zone-a"))
	s.Publish(plain)
	cla := s.LoadAssignment("plain.ns1")
	if len(cla.GetEndpoints()) != 1 || cla.GetEndpoints()[0].GetLoadBalancingWeight().GetValue() != 2 || cla.GetEndpoints()[0].GetLocality().GetSubZone() != "" {
		t.Errorf("registry without slow start: %v", cla)
	}
}

// TestAcknowledged: the readiness gate's wait for ACKs. A pod is acknowledged once every
// client subscribed to its ClusterLoadAssignment has ACKed a version holding it HEALTHY; a
// client that only received it does not count; a registry or pod not served has nothing to
// wait for; the timeout opens the wait whatever the clients do.
func TestAcknowledged(t *testing.T) {
	s := startServer(t, xds.Config{})
	key := types.NamespacedName{Namespace: "ns1", Name: "orders"}
	s.Publish(registry("ns1", "orders", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "zone-a")))
	if ok, n := s.Acknowledged(key, "a", time.Hour); !ok || n != 0 {
		t.Fatalf("no client connected: Acknowledged = %v, %d; want true, 0", ok, n)
	}
	c := adsclient.NewADSClient(context.Background(), &corev3.Node{Id: "gate-1"}, resourcev3.EndpointType)
	if err := c.InitConnect(dial(t, s)); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Fetch() // received, not acknowledged yet
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("fetch: %v, %v", resp, err)
	}
	if ok, n := s.Acknowledged(key, "a", time.Hour); ok || n != 1 {
		t.Fatalf("received but not ACKed: Acknowledged = %v, %d; want false, 1", ok, n)
	}
	if ok, _ := s.Acknowledged(key, "a", time.Nanosecond); !ok {
		t.Fatal("the timeout did not end the wait")
	}
	if err := c.Ack(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { ok, _ := s.Acknowledged(key, "a", time.Hour); return ok }, "the ACK of pod a")

	// A new pod: the client has an older version; it waits until the client ACKs the next.
	s.Publish(registry("ns1", "orders", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "zone-a"),
		pod("b", v1beta1.EndpointRegistered, "10.0.0.2", "zone-a")))
	if ok, n := s.Acknowledged(key, "b", time.Hour); ok || n != 1 {
		t.Fatalf("pod b pushed, not ACKed: Acknowledged = %v, %d; want false, 1", ok, n)
	}
	if ok, _ := s.Acknowledged(key, "a", time.Hour); !ok {
		t.Fatal("pod a, acknowledged before, waits again")
	}
	if _, err := c.Fetch(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { ok, _ := s.Acknowledged(key, "b", time.Hour); return ok }, "the ACK of pod b")

	// Nothing to wait for: an unknown pod, an unknown registry.
	if ok, _ := s.Acknowledged(key, "zzz", time.Hour); !ok {
		t.Error("a pod that is not published waits")
	}
	if ok, _ := s.Acknowledged(types.NamespacedName{Namespace: "ns1", Name: "nope"}, "a", time.Hour); !ok {
		t.Error("a registry that is not published waits")
	}
}

// The per-client request limit counts what costs the server a new watch of new names (a
// new subscription, a request for names the stream did not ask for), not a client's ACKs:
// a client that acknowledges every push at once must not throttle its own next push.
func TestRateLimitCountsNewRequestsNotAcks(t *testing.T) {
	s := startServer(t, xds.Config{RequestRate: 1, RequestBurst: 3})
	s.Publish(registry("ns1", "r", pod("a", v1beta1.EndpointRegistered, "10.0.0.1", "")))
	st := rawStream(t, s)
	names := []string{"r.ns1"}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "fast-acker"}, TypeUrl: resourcev3.EndpointType, ResourceNames: names}); err != nil {
		t.Fatal(err)
	}
	resp := recvWithin(t, st)
	// Ten pushes within well under a second, each acknowledged at once: ten requests, far
	// beyond a burst of 3 at 1/s if ACKs counted.
	for i := range 10 {
		if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: names,
			VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
			t.Fatal(err)
		}
		s.Publish(registry("ns1", "r", pod("a", v1beta1.EndpointRegistered, fmt.Sprintf("10.0.1.%d", i+1), "")))
		resp = recvWithin(t, st)
		if len(resp.GetResources()) != 1 {
			t.Fatalf("push %d: %d resources, want 1", i+1, len(resp.GetResources()))
		}
	}

	// A client asking for new names faster than the limit still has its stream closed.
	greedy := rawStream(t, s)
	for i := range 10 {
		if err := greedy.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "greedy"}, TypeUrl: resourcev3.EndpointType,
			ResourceNames: []string{fmt.Sprintf("n%d.ns1", i)}}); err != nil {
			break // closed already
		}
	}
	deadline := time.After(10 * time.Second)
	for {
		errc := make(chan error, 1)
		go func() { _, err := greedy.Recv(); errc <- err }()
		select {
		case err := <-errc:
			if err == nil {
				continue
			}
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("greedy stream ended with %v, want ResourceExhausted", err)
			}
			return
		case <-deadline:
			t.Fatal("a stream asking for new names beyond the limit was not closed")
		}
	}
}
