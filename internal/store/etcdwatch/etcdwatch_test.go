package etcdwatch_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store/etcdwatch"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// breakingWatcher is a real etcd client's Watcher whose first watch ends after its first
// response with events (a broken stream), and whose second watch starts only once the test
// releases it: what happens in between is what the resumption must cope with.
type breakingWatcher struct {
	clientv3.Watcher
	calls   atomic.Int32
	release chan struct{}
}

func (b *breakingWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	n := b.calls.Add(1)
	if n == 2 {
		<-b.release
	}
	in := b.Watcher.Watch(ctx, key, opts...)
	if n != 1 {
		return in
	}
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			out <- resp
			if len(resp.Events) > 0 {
				return
			}
		}
	}()
	return out
}

func TestPrefixResumesAndReportsCompactedHistory(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir())
	if err != nil {
		t.Fatalf("start etcd (set ETCD_BIN): %v", err)
	}
	t.Cleanup(srv.Stop)
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })

	w := &breakingWatcher{Watcher: cli, release: make(chan struct{})}
	var mu sync.Mutex
	var seen []string
	var missed atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		etcdwatch.Prefix(ctx, w, "/p/", func(ev *clientv3.Event) {
			mu.Lock()
			seen = append(seen, string(ev.Kv.Key))
			mu.Unlock()
		}, func() { missed.Add(1) })
	}()
	has := func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range seen {
			if k == key {
				return true
			}
		}
		return false
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (seen %v, missed %d)", what, seen, missed.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	opCtx, opCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer opCancel()
	// The first watch must be established before the first put, or the put is not an event.
	waitFor("the first watch", func() bool { return w.calls.Load() >= 1 })
	for !has("/p/a") {
		if _, err := cli.Put(opCtx, "/p/a", "1"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The stream broke after /p/a. While it is down: a change, then the history compacted.
	if _, err := cli.Put(opCtx, "/p/b", "1"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(opCtx, "/other", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(opCtx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	close(w.release)
	waitFor("missed after the compaction", func() bool { return missed.Load() == 1 })
	if has("/p/b") {
		t.Fatalf("/p/b was reported although its revision was compacted away: %v", seen)
	}
	// The watch starts again from now: later changes are reported, keys outside are not.
	waitFor("a third watch", func() bool { return w.calls.Load() >= 3 })
	for !has("/p/c") {
		if _, err := cli.Put(opCtx, "/p/c", "1"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if has("/other") {
		t.Fatalf("a key outside the prefix was reported: %v", seen)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Prefix did not return after its context ended")
	}
}
