package etcd_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// TestWireRoundTripToDiscovery is the store↔caller contract: the etcd store writes an
// endpoint with every field of wire.Endpoint set, and a pkg/discovery client (the library
// callers use) reads it back through its own list and watch. The endpoint is filled by
// reflection, so a field added to the wire format without a value that survives the trip
// fails here.
func TestWireRoundTripToDiscovery(t *testing.T) {
	srv := requireServer(t)
	cli := newClient(t, srv)
	prefix := fmt.Sprintf("/roundtrip-%d", time.Now().UnixNano())
	s := etcd.New(cli, etcd.Options{Prefix: prefix, Timeout: 10 * time.Second})

	var want wire.Endpoint
	fillEveryField(t, reflect.ValueOf(&want).Elem())
	want.Service, want.Namespace, want.Pod = "orders", "shop", "orders-0" // must match the key

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	scope := store.Scope{Service: want.Service, Namespace: want.Namespace}
	if _, err := s.Apply(ctx, scope, store.Changes{Create: []store.Endpoint{want}}); err != nil {
		t.Fatalf("apply: %v", err)
	}

	c, err := discovery.New(discovery.Config{Client: cli, Prefix: prefix, Service: want.Service})
	if err != nil {
		t.Fatalf("discovery client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatalf("discovery sync: %v", err)
	}
	all := c.All()
	if len(all) != 1 {
		t.Fatalf("discovery read %d instances, want 1: %+v", len(all), all)
	}
	got := all[0]
	if got.Key != s.Key(scope, want.Pod) || got.Key != wire.Key(prefix, want.Service, want.Namespace, want.Pod) {
		t.Errorf("key: discovery read %q, the store wrote %q", got.Key, s.Key(scope, want.Pod))
	}
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got.Endpoint)
	for i := range wv.NumField() {
		name := wv.Type().Field(i).Name
		if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			t.Errorf("field %s: the store wrote %v, discovery read %v", name, wv.Field(i), gv.Field(i))
		}
	}
}

// fillEveryField sets every field of v to a distinct non-zero value, and fails on a kind it
// does not know, so that a new field of wire.Endpoint cannot go untested.
func fillEveryField(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case f.Kind() == reflect.String:
			f.SetString("value-of-" + name)
		case f.Kind() == reflect.Int32 || f.Kind() == reflect.Int64 || f.Kind() == reflect.Int:
			f.SetInt(int64(1000 + i))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Type() == reflect.TypeFor[map[string]int32]():
			f.Set(reflect.ValueOf(map[string]int32{"http": 8080, "metrics-" + name: int32(9000 + i)}))
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
		default:
			t.Fatalf("wire.Endpoint.%s has type %s, which this round-trip test cannot fill: teach fillEveryField", name, f.Type())
		}
		if f.IsZero() {
			t.Fatalf("wire.Endpoint.%s still zero", name)
		}
	}
}
