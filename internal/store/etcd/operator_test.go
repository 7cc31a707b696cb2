package etcd_test

import (
	"testing"

	"github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
)

// guardKind builds, and takes, the write guard of a store under prefix.
type guardKind func(t *testing.T, f fixture) etcd.WriteGuard

// fenceGuard is the installation's write fence (leader election), taken.
func fenceGuard(t *testing.T, f fixture) etcd.WriteGuard {
	t.Helper()
	fence := fence.New(newClient(t, requireServer(t)), fence.Key(f.prefix, "registrar-system"), "leader", 0)
	if err := fence.Acquire(ctx(t)); err != nil {
		t.Fatalf("take the fence: %v", err)
	}
	return fence
}

// shardGuard is the fences of --sharding=lease with one shard (every namespace in it), taken.
func shardGuard(t *testing.T, f fixture) etcd.WriteGuard {
	t.Helper()
	fences := fence.NewShards(newClient(t, requireServer(t)), f.prefix, "ring", "replica-0", 1, 0)
	if ok, err := fences.Acquire(ctx(t), 0, alive("replica-0")); !ok || err != nil {
		t.Fatalf("take shard 0's fence: ok=%v err=%v", ok, err)
	}
	return fences
}

// operatorFixture is the store as the operator builds it (etcd.NewOperator: guarded,
// batching), under a prefix private to the test, and a raw client to read it back.
func operatorFixture(t *testing.T, guard guardKind) fixture {
	t.Helper()
	return operatorFixtureWith(t, guard, etcd.Options{})
}

func operatorFixtureWith(t *testing.T, guard guardKind, opts etcd.Options) fixture {
	t.Helper()
	f := newFixture(t, opts) // clears the prefix
	opts.Prefix = f.prefix
	s, err := etcd.NewOperator(newClient(t, requireServer(t)), guard(t, f), opts)
	if err != nil {
		t.Fatal(err)
	}
	f.store = s
	return f
}

func TestNewOperatorRefusesNoGuard(t *testing.T) {
	if _, err := etcd.NewOperator(nil, nil, etcd.Options{}); err == nil {
		t.Error("NewOperator without a guard: no error")
	}
}
