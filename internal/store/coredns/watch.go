package coredns

import (
	"context"
	"errors"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
)

var _ store.Watcher = (*Store)(nil)

// watchRetry is the pause (jittered) before a broken watch resumes.
const watchRetry = time.Second

// root is the key prefix of every record of the zone, ending in "/".
func (s *Store) root() string {
	labels := strings.Split(s.opts.Zone, ".")
	slices.Reverse(labels)
	return path.Join(append([]string{s.opts.Prefix}, labels...)...) + "/"
}

// Watch reports every change of a record key of the zone, whoever made it, until ctx ends
// (see store.Watcher): one prefix watch, resumed after an error from the revision after the
// last one seen; missed is called when etcd compacted that history. It needs a Store made on
// a *clientv3.Client (or any clientv3.Watcher); else it returns errors.ErrUnsupported.
func (s *Store) Watch(ctx context.Context, changed func(store.Change), missed func()) error {
	w, ok := s.kv.(clientv3.Watcher)
	if !ok {
		return errors.ErrUnsupported
	}
	root := s.root()
	var rev int64
	for ctx.Err() == nil {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithProgressNotify()}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev+1))
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range w.Watch(wctx, root, opts...) {
			if resp.CompactRevision != 0 {
				rev = 0
				missed()
				break
			}
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				if c, ok := change(root, ev); ok {
					changed(c)
				}
			}
			rev = max(rev, resp.Header.Revision)
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(float64(watchRetry) * (0.8 + 0.4*rand.Float64()))):
		}
	}
	return nil
}

// change decodes one event of a key {root}{namespace}/{service}/{pod} or
// {root}{namespace}/{service}/_tcp/_{port}/{pod}.
func change(root string, ev *clientv3.Event) (store.Change, bool) {
	parts := strings.SplitN(strings.TrimPrefix(string(ev.Kv.Key), root), "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return store.Change{}, false
	}
	pod, _, ok := parseKey(parts[2])
	if !ok {
		return store.Change{}, false
	}
	c := store.Change{Namespace: parts[0], Service: parts[1], Pod: pod, Revision: ev.Kv.ModRevision}
	c.Deleted = ev.Type == clientv3.EventTypeDelete
	return c, true
}
