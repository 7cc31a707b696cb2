package etcd

import (
	"testing"

	"github.com/registrar-dev/registrar/internal/store"
)

// TestTakeGroupsByGuard: a coalesced transaction carries one fence comparison, so take puts
// only Applies guarded by the first one's fence in it (per-shard fences: one namespace per
// shard here); the others stay queued, in order, for the next transaction.
func TestTakeGroupsByGuard(t *testing.T) {
	item := func(ns, key string) *txnItem {
		return &txnItem{scope: store.Scope{Service: "web", Namespace: ns}, ops: []op{{key: key, size: 10}}}
	}
	byNamespace := func(s store.Scope) string { return "fence/" + s.Namespace }
	sameFence := func(store.Scope) string { return "fence" }
	tests := []struct {
		name     string
		guardKey func(store.Scope) string
		queue    []*txnItem
		want     []string // keys of the first transaction
		rest     []string // keys left queued
	}{
		{"one fence: all coalesce", sameFence,
			[]*txnItem{item("a", "a1"), item("b", "b1"), item("a", "a2")}, []string{"a1", "b1", "a2"}, nil},
		{"per-shard fences: the first one's shard only", byNamespace,
			[]*txnItem{item("a", "a1"), item("b", "b1"), item("a", "a2")}, []string{"a1", "a2"}, []string{"b1"}},
		{"per-shard fences: the next transaction is the other shard's", byNamespace,
			[]*txnItem{item("b", "b1"), item("b", "b2")}, []string{"b1", "b2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &batcher{busy: true, queue: tt.queue}
			got := keysOf(b.take(100, 1<<20, tt.guardKey))
			if !equal(got, tt.want) {
				t.Errorf("take = %v, want %v", got, tt.want)
			}
			if rest := keysOf(b.queue); !equal(rest, tt.rest) {
				t.Errorf("left queued = %v, want %v", rest, tt.rest)
			}
		})
	}
}

func keysOf(items []*txnItem) []string {
	var keys []string
	for _, it := range items {
		for _, o := range it.ops {
			keys = append(keys, o.key)
		}
	}
	return keys
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
