package coredns

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcdwatch"
)

var _ store.Watcher = (*Store)(nil)

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
	etcdwatch.Prefix(ctx, w, root, func(ev *clientv3.Event) {
		if c, ok := change(root, ev); ok {
			changed(c)
		}
	}, missed)
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
