package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/memory"
	"github.com/registrar-dev/registrar/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memory.New(0) })
}

func TestWatchReportsEveryChange(t *testing.T) {
	s := memory.New(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan store.Change, 16)
	go func() { _ = s.Watch(ctx, func(c store.Change) { got <- c }, func() {}) }()
	scope := store.Scope{Service: "web", Namespace: "ns"}
	ep := storetest.Endpoint(scope, "web-0", "10.0.0.1", "o")
	// The watch registers asynchronously: write until it reports.
	deadline := time.After(10 * time.Second)
	for {
		s.Tamper(scope, "web-0", &ep)
		select {
		case c := <-got:
			if c.Service != "web" || c.Namespace != "ns" || c.Pod != "web-0" || c.Deleted || c.Revision == 0 {
				t.Fatalf("change = %+v", c)
			}
			s.Tamper(scope, "web-0", nil)
			for c := range got {
				if c.Deleted {
					return
				}
			}
		case <-deadline:
			t.Fatal("no change reported")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestFail(t *testing.T) {
	s := memory.New(0)
	s.Fail(memory.ErrDown)
	if _, err := s.List(context.Background(), store.Scope{Service: "a", Namespace: "b"}); err == nil {
		t.Error("List of a failed store succeeded")
	}
	s.Fail(nil)
	if _, err := s.List(context.Background(), store.Scope{Service: "a", Namespace: "b"}); err != nil {
		t.Error(err)
	}
}
