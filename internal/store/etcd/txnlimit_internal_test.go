package etcd

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
)

// guardOf is a WriteGuard that adds n comparisons.
type guardOf int

func (g guardOf) Guard(context.Context, store.Scope) (clientv3.Cmp, clientv3.Op, error) {
	return clientv3.Cmp{}, clientv3.Op{}, nil
}
func (g guardOf) Comparisons() int                               { return int(g) }
func (g guardOf) Fenced(store.Scope, *clientv3.TxnResponse) bool { return false }
func (g guardOf) GuardKey(store.Scope) string                    { return "fence" }

// TestOpsPerTxnLeavesRoomForTheGuard: the writes of one transaction leave room for every
// comparison the guard says it adds, whichever option set the guard.
func TestOpsPerTxnLeavesRoomForTheGuard(t *testing.T) {
	f := fence.New(nil, "/fence", "me", 0)
	tests := []struct {
		name string
		opts Options
		want int
	}{
		{"unguarded", Options{}, DefaultMaxTxnOps},
		{"Fence", Options{Fence: f}, DefaultMaxTxnOps - 1},
		{"Guard: a fence", Options{Guard: f}, DefaultMaxTxnOps - 1},
		{"Guard: shard fences", Options{Guard: fence.NewShards(nil, "/p", "ring", "me", 4, 0)}, DefaultMaxTxnOps - 1},
		{"Guard of 3 comparisons", Options{Guard: guardOf(3)}, DefaultMaxTxnOps - 3},
		{"Guard over Fence", Options{Fence: f, Guard: guardOf(5)}, DefaultMaxTxnOps - 5},
		{"limit 10, guard of 3", Options{MaxTxnOps: 10, Guard: guardOf(3)}, 7},
		{"a guard that leaves no room: one write at a time", Options{MaxTxnOps: 2, Guard: guardOf(3)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(nil, tt.opts).opsPerTxn(); got != tt.want {
				t.Errorf("opsPerTxn = %d, want %d", got, tt.want)
			}
		})
	}
}
