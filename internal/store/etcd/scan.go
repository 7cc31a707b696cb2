package etcd

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
)

var _ store.Scanner = (*Store)(nil)

// scanPage is how many keys one read of ListAll returns.
const scanPage = 1000

// ListAll returns every endpoint record under the prefix, read in pages of scanPage keys
// (each call bounded by Timeout). Service and Namespace come from the key; a record whose
// value names another scope is nobody's.
func (s *Store) ListAll(ctx context.Context) ([]store.Record, error) {
	root := s.opts.Prefix + "/"
	end := clientv3.GetPrefixRangeEnd(root)
	var out []store.Record
	from := root
	for {
		cctx, cancel := context.WithTimeout(ctx, s.callTimeout())
		resp, err := s.kv.Get(cctx, from, clientv3.WithRange(end), clientv3.WithLimit(scanPage))
		s.observe(cctx, err)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", root, err)
		}
		for _, kv := range resp.Kvs {
			parts := strings.Split(strings.TrimPrefix(string(kv.Key), root), "/")
			if len(parts) != 3 || parts[0] == FenceDir || checkScope(store.Scope{Service: parts[0], Namespace: parts[1]}) != nil {
				continue
			}
			scope := store.Scope{Service: parts[0], Namespace: parts[1]}
			if _, own := s.ownSegment(parts[2]); !own {
				continue // another cluster's
			}
			rec := decodeRecord(s.listPrefix(scope), kv.Key, kv.Value, kv.ModRevision)
			s.disownForeign(&rec)
			if rec.Service != scope.Service || rec.Namespace != scope.Namespace {
				rec.Owner = ""
			}
			rec.Service, rec.Namespace = scope.Service, scope.Namespace
			out = append(out, rec)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
