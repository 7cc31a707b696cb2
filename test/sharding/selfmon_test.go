package sharding

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// selfMonKeys reads, with the test's own client, the heartbeats under the prefix (key →
// writer and revision) and the canary keys.
func (h *harness) selfMonKeys() (beats map[string]beat, canaries []string) {
	h.t.Helper()
	beats = map[string]beat{}
	resp, err := h.store.Get(h.ctx, h.prefix+"/.registrar/heartbeat", clientv3.WithPrefix())
	if err != nil {
		h.t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		var v struct {
			Writer string `json:"writer"`
		}
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			h.t.Fatalf("heartbeat %s: %v", kv.Key, err)
		}
		beats[string(kv.Key)] = beat{writer: v.Writer, rev: kv.ModRevision}
	}
	resp, err = h.store.Get(h.ctx, h.prefix+"/.registrar/canary/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		h.t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		canaries = append(canaries, string(kv.Key))
	}
	return beats, canaries
}

type beat struct {
	writer string
	rev    int64
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", waitLimit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestShardedSelfMonitoring: with --sharding=lease every replica runs the heartbeat and the
// canary, each on keys of its own (read back with a separate client): two replicas, two
// heartbeats advancing and two canary keys; one stopping cleanly removes its own and leaves
// the other's, which goes on advancing. --xds-bind-address is refused at start.
func TestShardedSelfMonitoring(t *testing.T) {
	h := newHarness(t)
	refused := h.start("replica-xds", "--xds-bind-address=127.0.0.1:0")
	if !refused.WaitExit(waitLimit) {
		t.Fatal("a replica with --sharding=lease and --xds-bind-address runs; want it refused at start")
	}
	if tail := refused.LogTail(20); !strings.Contains(tail, "--sharding=lease cannot be combined with --xds-bind-address") {
		t.Errorf("refused without naming both flags:\n%s", tail)
	}

	a, b := "replica-a", "replica-b"
	extra := []string{"--heartbeat-interval=200ms", "--canary-interval=500ms", "--store-health-interval=1s"}
	h.start(a, extra...)
	rb := h.start(b, extra...)
	var first map[string]beat
	waitUntil(t, "a heartbeat of each replica, keys of their own", func() bool {
		first, _ = h.selfMonKeys()
		writers := map[string]bool{}
		for _, v := range first {
			writers[v.writer] = true
		}
		return len(first) == 2 && len(writers) == 2
	})
	waitUntil(t, "both heartbeats advancing", func() bool {
		now, _ := h.selfMonKeys()
		for k, v := range first {
			if now[k].rev <= v.rev {
				return false
			}
		}
		return true
	})
	waitUntil(t, "a canary key of each replica", func() bool { _, c := h.selfMonKeys(); return len(c) == 2 })
	_, canaries := h.selfMonKeys()
	t.Logf("two replicas: heartbeats %v, canaries %v", first, canaries)

	rb.Stop(20 * time.Second)
	var left map[string]beat
	waitUntil(t, "the stopped replica's heartbeat and canary gone, the other's kept", func() bool {
		var c []string
		left, c = h.selfMonKeys()
		return len(left) == 1 && len(c) == 1
	})
	for k := range left {
		if !strings.Contains(k, a) {
			t.Errorf("heartbeat left %s, want replica a's", k)
		}
	}
	_, c := h.selfMonKeys()
	t.Logf("replica b stopped: heartbeats %v, canaries %v", left, c)
	if c[0] != canaries[0] && c[0] != canaries[1] {
		t.Errorf("canary left %s, not one of %v", c[0], canaries)
	}
	if !strings.Contains(c[0], a) {
		t.Errorf("canary left %s, want replica a's", c[0])
	}
	waitUntil(t, "replica a's heartbeat advancing after b stopped", func() bool {
		now, _ := h.selfMonKeys()
		for k, v := range left {
			if now[k].rev <= v.rev {
				return false
			}
		}
		return len(now) == 1
	})
}
