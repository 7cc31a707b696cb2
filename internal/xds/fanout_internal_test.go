package xds

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

func cla(name string) map[string]types.Resource {
	return map[string]types.Resource{name: &endpointv3.ClusterLoadAssignment{ClusterName: name}}
}

func newTestSub(c *sotwEDS, names []string) *edsSubscription {
	e := &edsSubscription{kick: make(chan struct{}, 1)}
	c.add(e)
	e.request(names)
	return e
}

// marked takes what was marked on e (and its kick), sorted.
func marked(e *edsSubscription) []string {
	select {
	case <-e.kick:
	default:
	}
	dirty, _ := e.take()
	return slices.Sorted(maps.Keys(dirty))
}

// TestPublishTouchesOnlyItsSubscribers: a publish marks the state-of-the-world streams that
// subscribe to what changed, and touches no other stream. At fleet scale (make
// bench-xds-fleet: 10,000 clients of 5 services each out of 1,000) looking at every stream on
// every change was a third of the xDS server's CPU, under the lock every publish and every
// stream's push takes; and a stream busy with its own subscription must not hold up the
// publish of a resource it does not subscribe to. Subscriptions that change (a stream naming
// other resources, turning wildcard, closing) are followed.
func TestPublishTouchesOnlyItsSubscribers(t *testing.T) {
	c := newSotwEDS()
	a := newTestSub(c, []string{"x", "z"})
	b := newTestSub(c, []string{"y"})
	w := newTestSub(c, nil) // the legacy wildcard
	star := newTestSub(c, []string{"*", "y"})

	update := func(seq uint64, name string) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- c.update(seq, cla(name), nil, nil) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("update %s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("publishing %s waited on a stream that does not subscribe to it", name)
		}
	}

	// b is busy (its own lock held): the publish of x must not wait for it.
	b.mu.Lock()
	done := make(chan error, 1)
	go func() { done <- c.update(1, cla("x"), nil, nil) }()
	select {
	case err := <-done:
		b.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		b.mu.Unlock()
		if err := <-done; err != nil {
			t.Error(err)
		}
		t.Fatal("publishing x waited on a stream that subscribes to y only")
	}
	for _, tc := range []struct {
		name string
		sub  *edsSubscription
		want []string
	}{{"a", a, []string{"x"}}, {"b", b, nil}, {"wildcard", w, []string{"x"}}, {"*", star, []string{"x"}}} {
		if got := marked(tc.sub); !slices.Equal(got, tc.want) {
			t.Errorf("after x: stream %s marked %v, want %v", tc.name, got, tc.want)
		}
	}

	// a now names y only; b turns wildcard; w names z.
	a.request([]string{"y"})
	b.request([]string{"*"})
	w.request([]string{"z"})
	update(2, "x")
	update(3, "z")
	for _, tc := range []struct {
		name string
		sub  *edsSubscription
		want []string
	}{{"a", a, nil}, {"b", b, []string{"x", "z"}}, {"w", w, []string{"z"}}, {"*", star, []string{"x", "z"}}} {
		if got := marked(tc.sub); !slices.Equal(got, tc.want) {
			t.Errorf("after resubscribing: stream %s marked %v, want %v", tc.name, got, tc.want)
		}
	}

	// A closed stream is not marked again; a deletion marks its subscribers.
	c.remove(a)
	if err := c.update(4, nil, nil, []string{"y"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sub  *edsSubscription
		want []string
	}{{"a (closed)", a, nil}, {"b", b, []string{"y"}}, {"w", w, nil}, {"*", star, []string{"y"}}} {
		if got := marked(tc.sub); !slices.Equal(got, tc.want) {
			t.Errorf("after deleting y: stream %s marked %v, want %v", tc.name, got, tc.want)
		}
	}
}

// BenchmarkPublishOneOfManyStreams: one ClusterLoadAssignment published while 10,000
// state-of-the-world streams subscribe to 5 of 1,000 names each (make bench-xds-fleet's
// shape).
func BenchmarkPublishOneOfManyStreams(b *testing.B) {
	c := newSotwEDS()
	for i := range 10000 {
		names := make([]string, 5)
		for j := range names {
			names[j] = fmt.Sprintf("svc-%d", (i*7+j*131)%1000)
		}
		newTestSub(c, names)
	}
	res := cla("svc-1")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := c.update(uint64(i+1), res, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}
