package storesync

import (
	"errors"
	"strings"
	"testing"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
)

// status.stores reports each store as the sync left it: the registry's own records in one
// that answered, and the error of one that failed (bounded), without its records.
func TestStatuses(t *testing.T) {
	own := func(pod string) store.Record {
		return store.Record{Endpoint: store.Endpoint{Pod: pod, Owner: "uid-web"}}
	}
	results := []StoreResult{
		{Name: "a", Records: map[string]store.Record{"p1": own("p1"), "p2": own("p2"),
			"x": {Endpoint: store.Endpoint{Pod: "x", Owner: "someone-else"}}}},
		{Name: "b", Err: errors.New("store b: down " + strings.Repeat("!", 2*maxStoreMessage))},
	}
	st := Statuses(results, "uid-web", nil)
	if len(st) != 2 || st[0] != (v1beta1.StoreStatus{Name: "a", Registered: 2, Synced: true}) ||
		st[1].Name != "b" || st[1].Synced || st[1].Registered != 0 || !strings.HasPrefix(st[1].Message, "store b: down") ||
		len(st[1].Message) != maxStoreMessage {
		t.Fatalf("status.stores = %+v", st)
	}
	// A reconcile that did not reach the stores keeps the previous report.
	if got := Statuses(nil, "uid-web", st); len(got) != 2 || got[0] != st[0] {
		t.Fatalf("status.stores without a sync = %+v, want the previous report", got)
	}
}
