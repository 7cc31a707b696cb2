package coredns

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
)

// List returns one record per pod found under the scope's prefix. Keys outside registrar's
// layout are ignored (they cannot collide with its keys); a pod any of whose keys lacks
// registrar's metadata, or whose keys disagree about the owner, is listed without an owner.
func (s *Store) List(ctx context.Context, scope store.Scope) ([]store.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	prefix := s.scopePrefix(scope)
	resp, err := s.kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	pods := map[string]*podKeys{}
	ttl := s.ttl(scope)
	for _, kv := range resp.Kvs {
		pod, port, ok := parseKey(strings.TrimPrefix(string(kv.Key), prefix))
		if !ok {
			continue
		}
		if pods[pod] == nil {
			pods[pod] = &podKeys{pod: pod, ttl: ttl, ports: map[string]int32{}, hosts: map[string]bool{}, owners: map[string]bool{}}
		}
		pods[pod].add(string(kv.Key), port, kv.ModRevision, kv.Value)
	}
	records := make([]store.Record, 0, len(pods))
	for _, pod := range slices.Sorted(maps.Keys(pods)) {
		records = append(records, pods[pod].record())
	}
	return records, nil
}

// parseKey splits a key relative to a scope prefix: "<pod>" or "_tcp/_<port>/<pod>".
func parseKey(rel string) (pod, port string, ok bool) {
	parts := strings.Split(rel, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return parts[0], "", true
	case len(parts) == 3 && parts[0] == "_tcp" && len(parts[1]) > 1 && parts[1][0] == '_' && parts[2] != "":
		return parts[2], parts[1][1:], true
	}
	return "", "", false
}

// podKeys gathers the keys of one pod while listing.
type podKeys struct {
	pod      string
	firstKey string
	revision int64
	meta     *store.Endpoint
	foreign  bool // a key without registrar's metadata
	base     bool // a key without a port
	ttl      uint32
	staleTTL bool // a key whose TTL is not the scope's
	ports    map[string]int32
	hosts    map[string]bool
	owners   map[string]bool
}

func (p *podKeys) add(key, port string, modRevision int64, value []byte) {
	if p.firstKey == "" {
		p.firstKey = key
	}
	p.revision = max(p.revision, modRevision)
	var rec Record
	if err := json.Unmarshal(value, &rec); err != nil || rec.Registrar == nil {
		p.foreign = true
		return
	}
	if p.meta == nil {
		p.meta = rec.Registrar
	}
	p.owners[rec.Registrar.Owner] = true
	p.hosts[rec.Host] = true
	p.staleTTL = p.staleTTL || rec.TTL != p.ttl
	if port == "" {
		p.base = true
	} else {
		p.ports[port] = rec.Port
	}
}

// record is what the keys say: the metadata, with the ports and address actually served, so
// that a difference from the desired endpoint plans an update that rewrites every key.
func (p *podKeys) record() store.Record {
	r := store.Record{Key: p.firstKey, Revision: p.revision, Endpoint: store.Endpoint{Pod: p.pod}}
	if p.foreign || len(p.owners) != 1 {
		return r
	}
	r.Endpoint = *p.meta
	r.Pod = p.pod
	r.Ports = nil
	if len(p.ports) > 0 {
		r.Ports = p.ports
	}
	if len(p.hosts) != 1 || (p.base && len(p.ports) > 0) || p.staleTTL {
		r.Address = "" // inconsistent keys or another TTL: never equal to a desired endpoint
	} else {
		r.Address = slices.Collect(maps.Keys(p.hosts))[0]
	}
	return r
}

// group is the guarded writes of one pod: never split across transactions.
type group struct {
	cmps []clientv3.Cmp
	ops  []clientv3.Op
	put  *store.Endpoint
	size int
}

// Apply writes changes in as few transactions as etcd's operation limit allows, each pod's
// keys in one. A concurrent writer makes a transaction fail with ErrConflict.
func (s *Store) Apply(ctx context.Context, scope store.Scope, changes store.Changes) ([]store.Record, error) {
	groups, err := s.groups(scope, changes)
	if err != nil {
		return nil, err
	}
	written := make([]store.Record, 0, len(changes.Create)+len(changes.Update))
	for start := 0; start < len(groups); {
		end, size := start, 0
		for end < len(groups) && (end == start || size+groups[end].size <= s.opts.MaxTxnOps) {
			size += groups[end].size
			end++
		}
		rev, err := s.commit(ctx, scope, groups[start:end])
		if err != nil {
			return written, err
		}
		for _, g := range groups[start:end] {
			if g.put != nil {
				written = append(written, store.Record{Endpoint: *g.put, Key: s.Keys(scope, *g.put)[0], Revision: rev})
			}
		}
		start = end
	}
	return written, nil
}

func (s *Store) groups(scope store.Scope, c store.Changes) ([]group, error) {
	out := make([]group, 0, c.Len())
	for i := range c.Delete {
		out = append(out, s.change(scope, &c.Delete[i], nil))
	}
	for i := range c.Create {
		out = append(out, s.change(scope, nil, &c.Create[i]))
	}
	for i := range c.Update {
		out = append(out, s.change(scope, &c.Update[i].Old, &c.Update[i].New))
	}
	for i := range out {
		if out[i].put == nil {
			continue
		}
		values, err := s.values(scope, out[i].put)
		if err != nil {
			return nil, err
		}
		for _, key := range slices.Sorted(maps.Keys(values)) {
			out[i].ops = append(out[i].ops, clientv3.OpPut(key, values[key]))
		}
		out[i].size = max(len(out[i].cmps), len(out[i].ops))
	}
	return out, nil
}

// change guards and deletes the keys of old (when set) and guards the keys of next (when
// set) that old does not have; the puts of next are added by groups.
func (s *Store) change(scope store.Scope, old *store.Record, next *store.Endpoint) group {
	g := group{put: next}
	oldKeys := map[string]bool{}
	if old != nil {
		for _, key := range s.Keys(scope, old.Endpoint) {
			oldKeys[key] = true
			g.cmps = append(g.cmps,
				clientv3.Compare(clientv3.ModRevision(key), ">", 0),
				clientv3.Compare(clientv3.ModRevision(key), "<", old.Revision+1))
		}
	}
	newKeys := map[string]bool{}
	if next != nil {
		for _, key := range s.Keys(scope, *next) {
			newKeys[key] = true
			if !oldKeys[key] {
				g.cmps = append(g.cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			}
		}
	}
	if old != nil && len(old.Ports) > 0 { // a stray port-less key of the pod goes too, if unchanged
		if base := s.scopePrefix(scope) + old.Pod; !newKeys[base] {
			g.cmps = append(g.cmps, clientv3.Compare(clientv3.ModRevision(base), "<", old.Revision+1))
			g.ops = append(g.ops, clientv3.OpDelete(base))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(oldKeys)) {
		if !newKeys[key] {
			g.ops = append(g.ops, clientv3.OpDelete(key))
		}
	}
	g.size = max(len(g.cmps), len(g.ops))
	return g
}

// commit runs the groups in one guarded transaction and returns the revision it created.
func (s *Store) commit(ctx context.Context, scope store.Scope, groups []group) (int64, error) {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	for _, g := range groups {
		cmps, ops = append(cmps, g.cmps...), append(ops, g.ops...)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("write %d pods under %s: %w", len(groups), s.scopePrefix(scope), err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("write %d pods under %s: %w", len(groups), s.scopePrefix(scope), store.ErrConflict)
	}
	return resp.Header.Revision, nil
}
