package faults

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/internal/sharding"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
)

// TestShardOwnerKilled: three replicas with --sharding=lease; the one holding the shard of
// the test's namespace is killed (-9) mid-churn, more changes come while nobody owns the
// shard, and another replica takes the shard's fence once the killed one's Lease expired.
// The recorder judges it like every fault: nothing lost, nothing written after
// ineligibility beyond the window, the store equal to the eligible pods at the end.
func TestShardOwnerKilled(t *testing.T) {
	slow(t)
	srv := startStore(t)
	s := newScenario(t, []string{srv.Endpoint()})
	const shards, lease = 8, 3 * time.Second
	ring := "ring-" + s.ns
	ops := map[string]*operator{}
	for _, id := range []string{"shard-a", "shard-b", "shard-c"} {
		cfg := s.operatorConfig()
		cfg.extra = append(slices.Clone(cfg.extra), "--sharding=lease", "--shard-id="+id,
			fmt.Sprintf("--shard-count=%d", shards), "--shard-lease-namespace="+s.ns, "--store-fence-name="+ring,
			"--shard-lease-duration="+lease.String(), "--shard-renew-period=500ms")
		ops[id] = startOperator(t, id, cfg)
	}
	key := fence.ShardKey(prefix, ring, sharding.ShardOf(s.ns, shards))
	holder := func() string {
		ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
		defer cancel()
		resp, err := s.store.Get(ctx, key)
		if err != nil || len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Value)
	}
	var owner string
	if !waitFor(time.Minute, func() bool { owner = holder(); return ops[owner] != nil }) {
		t.Fatalf("no replica took the fence of the namespace's shard %s", key)
	}
	for range 4 {
		s.addReady()
	}
	s.converge(time.Now())

	owner = holder()
	wait := s.churnInBackground(12, 150*time.Millisecond)
	time.Sleep(600 * time.Millisecond) // let a few churn steps land before the kill: scenario pacing
	ops[owner].Kill()
	killed := time.Now()
	wait()
	for range 2 { // more changes while nobody owns the shard
		s.unready(s.oldestEligible())
		s.addReady()
	}
	var next string
	if !waitFor(time.Minute, func() bool { next = holder(); return next != "" && next != owner }) {
		t.Fatalf("no replica took the shard over from killed %s", owner)
	}
	took := time.Since(killed)
	conv := s.converge(s.faultEnded())
	for id, o := range ops {
		if id != owner && !o.running() {
			t.Errorf("replica %s exited: %v", id, o.Exited())
		}
	}
	s.finish("S1. shard owner kill -9 mid-churn (3 replicas, --sharding=lease)", conv,
		fmt.Sprintf("%s took the shard over %s after the kill (lease %s)", next, took.Round(10*time.Millisecond), lease))
}
