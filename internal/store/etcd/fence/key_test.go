package fence_test

import (
	"testing"

	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
)

// How a fence guards a Store's writes (a deposed leader, a lost shard, another installation
// on the same cluster ID) is tested with the Store, in internal/store/etcd: fence_test.go,
// shardfence_test.go, cluster_test.go.

func TestKey(t *testing.T) {
	if got, want := fence.Key("/registrar/services/", "registrar-system"), "/registrar/services/.registrar/fence/registrar-system"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}

func TestShardKey(t *testing.T) {
	if got, want := fence.ShardKey("/registrar/services/", "registrar-system", 7), "/registrar/services/.registrar/fence/registrar-system/shard-0007"; got != want {
		t.Errorf("ShardKey = %q, want %q", got, want)
	}
}
