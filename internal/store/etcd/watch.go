package etcd

import (
	"context"
	"errors"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcdwatch"
)

var _ store.Watcher = (*Store)(nil)

// Watch reports every change of a key {prefix}/{service}/{namespace}/{pod}, whoever made
// it, until ctx ends (see store.Watcher). One prefix watch covers the whole store; after an
// error it resumes from the revision after the last one seen, so nothing is missed unless
// etcd compacted that history, which missed reports. It needs a Store made on a
// *clientv3.Client (or any clientv3.Watcher); else it returns errors.ErrUnsupported.
func (s *Store) Watch(ctx context.Context, changed func(store.Change), missed func()) error {
	w, ok := s.kv.(clientv3.Watcher)
	if !ok {
		return errors.ErrUnsupported
	}
	root := s.opts.Prefix + "/"
	etcdwatch.Prefix(ctx, w, root, func(ev *clientv3.Event) {
		if c, ok := s.change(root, ev); ok {
			changed(c)
		}
	}, missed)
	return nil
}

// change decodes one event of a key {root}{service}/{namespace}/{pod}; other keys (the fence,
// the lease record, anything deeper or malformed) are not endpoints.
func (s *Store) change(root string, ev *clientv3.Event) (store.Change, bool) {
	parts := strings.Split(strings.TrimPrefix(string(ev.Kv.Key), root), "/")
	if len(parts) != 3 || parts[0] == FenceDir || checkSegment("service", parts[0]) != nil || checkSegment("namespace", parts[1]) != nil || checkSegment("pod", parts[2]) != nil {
		return store.Change{}, false
	}
	pod, own := s.ownSegment(parts[2])
	if !own {
		return store.Change{}, false // another cluster's key
	}
	c := store.Change{Service: parts[0], Namespace: parts[1], Pod: pod, Revision: ev.Kv.ModRevision}
	if ev.Type == clientv3.EventTypeDelete {
		c.Deleted = true
	}
	return c, true
}
