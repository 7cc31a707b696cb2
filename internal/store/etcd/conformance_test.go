package etcd_test

import (
	"testing"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/storetest"
)

// TestConformance runs the suite against the store as the operator builds it
// (etcd.NewOperator): guarded by the installation's fence, or with --sharding=lease by the
// fences of its shards, and batching.
func TestConformance(t *testing.T) {
	t.Run("Fence", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return operatorFixture(t, fenceGuard).store })
	})
	t.Run("ShardFences", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return operatorFixture(t, shardGuard).store })
	})
}
