package xds_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/xds"
)

// edsStream is a raw state-of-the-world EDS subscription driven by hand.
type edsStream struct {
	t    *testing.T
	st   discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	resp chan *discoveryv3.DiscoveryResponse
	last *discoveryv3.DiscoveryResponse
}

func newEDSStream(t *testing.T, s *xds.Server) *edsStream {
	t.Helper()
	e := &edsStream{t: t, st: rawStream(t, s), resp: make(chan *discoveryv3.DiscoveryResponse, 16)}
	go func() {
		for {
			r, err := e.st.Recv()
			if err != nil {
				close(e.resp)
				return
			}
			e.resp <- r
		}
	}()
	return e
}

// ask sends an EDS request for names with the version and nonce given.
func (e *edsStream) ask(names []string, version, nonce string) {
	e.t.Helper()
	err := e.st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "raw"}, TypeUrl: resourcev3.EndpointType,
		ResourceNames: names, VersionInfo: version, ResponseNonce: nonce})
	if err != nil {
		e.t.Fatal(err)
	}
}

// ack acknowledges the last response, asking for names.
func (e *edsStream) ack(names ...string) {
	e.t.Helper()
	e.ask(names, e.last.GetVersionInfo(), e.last.GetNonce())
}

// next returns the names and pod sets of the next response.
func (e *edsStream) next() map[string]map[string]string {
	e.t.Helper()
	select {
	case r, ok := <-e.resp:
		if !ok {
			e.t.Fatal("stream closed")
		}
		e.last = r
		out := map[string]map[string]string{}
		for _, a := range r.GetResources() {
			cla := &endpointv3.ClusterLoadAssignment{}
			if err := a.UnmarshalTo(cla); err != nil {
				e.t.Fatal(err)
			}
			if _, dup := out[cla.GetClusterName()]; dup {
				e.t.Fatalf("%s twice in one response", cla.GetClusterName())
			}
			out[cla.GetClusterName()] = health(cla)
		}
		return out
	case <-time.After(10 * time.Second):
		e.t.Fatal("no response within 10s")
	}
	return nil
}

// none checks that no response arrives within a short window.
func (e *edsStream) none(why string) {
	e.t.Helper()
	select {
	case r := <-e.resp:
		e.t.Fatalf("%s: got a response with %d resources", why, len(r.GetResources()))
	case <-time.After(300 * time.Millisecond):
	}
}

func names(m map[string]map[string]string) string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// The state-of-the-world EDS protocol as sotw.go serves it: a first request is answered with
// what exists of its names; an ACK repeating the names gets nothing until one of them
// changes; a response holds only the changed ClusterLoadAssignments; a change made while a
// response is in flight waits for its ACK; a stale nonce is ignored; a new subscription
// sends only what the client lacks; a deleted and re-created assignment is sent again; a
// stream naming another server's version gets everything.
func TestStateOfTheWorldEDS(t *testing.T) {
	s := startServer(t, xds.Config{})
	pub := func(name, ip string) {
		t.Helper()
		if res := s.Publish(registry("ns1", name, pod("p-"+name, v1beta1.EndpointRegistered, ip, ""))); !res.OK() {
			t.Fatalf("publish %s: %+v", name, res)
		}
	}
	pub("a", "10.0.0.1")
	pub("b", "10.0.0.2")
	pub("c", "10.0.0.3")

	e := newEDSStream(t, s)
	e.ask([]string{"b.ns1", "a.ns1", "nope.ns1"}, "", "")
	if got := names(e.next()); got != "a.ns1,b.ns1" {
		t.Fatalf("first answer: %s", got)
	}
	if !strings.HasPrefix(e.last.GetVersionInfo(), s.VersionPrefix()) {
		t.Fatalf("version %q lacks the process prefix %q", e.last.GetVersionInfo(), s.VersionPrefix())
	}
	e.ack("b.ns1", "a.ns1", "nope.ns1")
	e.none("an ACK with nothing changed")

	pub("c", "10.0.0.33")
	e.none("a change of a name not subscribed")
	pub("a", "10.0.0.11")
	got := e.next()
	if names(got) != "a.ns1" || got["a.ns1"]["p-a"] == "" || !strings.Contains(got["a.ns1"]["p-a"], "10.0.0.11") {
		t.Fatalf("after a's change: %v", got)
	}

	// In flight: b changes twice before the ACK; the ACK brings b's newest content once.
	pub("b", "10.0.0.21")
	pub("b", "10.0.0.22")
	e.none("a change while a response is in flight")
	inFlight := e.last
	e.ack("b.ns1", "a.ns1", "nope.ns1")
	got = e.next()
	if names(got) != "b.ns1" || !strings.Contains(got["b.ns1"]["p-b"], "10.0.0.22") {
		t.Fatalf("after the ACK: %v", got)
	}

	// A request answering an older response is ignored.
	e.ask([]string{"a.ns1", "b.ns1", "c.ns1"}, inFlight.GetVersionInfo(), inFlight.GetNonce())
	e.none("a request with a stale nonce")

	// A new subscription: only what the client lacks (c), not a and b again.
	e.ack("a.ns1", "b.ns1", "c.ns1")
	if got := names(e.next()); got != "c.ns1" {
		t.Fatalf("after subscribing to c: %s", got)
	}
	e.ack("a.ns1", "b.ns1", "c.ns1")

	// Deleted: nothing to send (state of the world does not tell EDS deletions); re-created
	// with the same content: sent again, the client's copy was forgotten.
	s.Unpublish(types.NamespacedName{Namespace: "ns1", Name: "a"})
	e.none("a deleted assignment")
	pub("a", "10.0.0.11")
	if got := names(e.next()); got != "a.ns1" {
		t.Fatalf("after re-creating a: %s", got)
	}
	e.ack("a.ns1", "b.ns1", "c.ns1")

	// Unsubscribed names are forgotten: subscribing to b again sends it.
	e.ack("a.ns1")
	e.none("unsubscribing")
	e.ack("a.ns1", "b.ns1")
	if got := names(e.next()); got != "b.ns1" {
		t.Fatalf("after subscribing to b again: %s", got)
	}

	// A client coming from another server (a restart) names a version of another prefix: it
	// gets all its names.
	r := newEDSStream(t, s)
	r.ask([]string{"a.ns1", "b.ns1", "c.ns1"}, "other-server.7", "")
	if got := names(r.next()); got != "a.ns1,b.ns1,c.ns1" {
		t.Fatalf("a client of another server: %s", got)
	}
}

// A first EDS request with no names is a wildcard (the legacy form): every assignment, and
// every later change.
func TestStateOfTheWorldEDSWildcard(t *testing.T) {
	s := startServer(t, xds.Config{})
	s.Publish(registry("ns1", "a", pod("p-a", v1beta1.EndpointRegistered, "10.0.0.1", "")))
	s.Publish(registry("ns2", "b", pod("p-b", v1beta1.EndpointRegistered, "10.0.0.2", "")))
	e := newEDSStream(t, s)
	e.ask(nil, "", "")
	if got := names(e.next()); got != "a.ns1,b.ns2" {
		t.Fatalf("wildcard: %s", got)
	}
	e.ack()
	e.none("a wildcard ACK with nothing changed")
	s.Publish(registry("ns3", "c", pod("p-c", v1beta1.EndpointRegistered, "10.0.0.3", "")))
	if got := names(e.next()); got != "c.ns3" {
		t.Fatalf("a new registry under a wildcard: %s", got)
	}
	// Naming resources ends the legacy wildcard; an empty request then subscribes to nothing,
	// so the client holds nothing: asking for a again sends it again. (Requests on a stream
	// are handled in order; a publish between them would race with the empty request.)
	e.ack("a.ns1")
	e.none("narrowing to a name already held")
	e.ack()
	e.none("unsubscribing from everything")
	e.ack("a.ns1")
	if got := names(e.next()); got != "a.ns1" {
		t.Fatalf("subscribing again after an empty request: %s", got)
	}
}
