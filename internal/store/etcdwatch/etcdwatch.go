// Package etcdwatch is the one resumable prefix watch of the stores kept in etcd (the etcd
// store and CoreDNS's etcd plugin layout): after an error it resumes from the revision after
// the last one seen, so nothing is missed unless etcd compacted that history.
package etcdwatch

import (
	"context"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Retry is the pause (jittered ±20 %) before a broken watch resumes.
const Retry = time.Second

// Prefix calls event for every event under prefix until ctx ends. When the history to
// resume from was compacted it calls missed (the caller must re-read) and starts again
// from the current revision.
func Prefix(ctx context.Context, w clientv3.Watcher, prefix string, event func(*clientv3.Event), missed func()) {
	var rev int64 // the last revision seen; 0 before the first response
	for ctx.Err() == nil {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithProgressNotify()}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev+1))
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range w.Watch(wctx, prefix, opts...) {
			if resp.CompactRevision != 0 { // the history to resume from is gone
				rev = 0
				missed()
				break
			}
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				event(ev)
			}
			rev = max(rev, resp.Header.Revision)
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(float64(Retry) * (0.8 + 0.4*rand.Float64()))):
		}
	}
}
