package zookeeper

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/registrar-dev/registrar/internal/store"
)

// List returns a record for every child of {basePath}/{service} named "{namespace}.…".
// A child registrar did not write (no owner in its payload metadata) is listed without an
// owner, so it is never touched; children of other namespaces are not listed.
func (s *Store) List(ctx context.Context, scope store.Scope) ([]store.Record, error) {
	dir := s.servicePath(scope)
	var children []string
	err := s.call(ctx, "list "+dir, func() (err error) {
		children, _, err = s.conn.Children(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return []store.Record{}, nil
	}
	if err != nil {
		return nil, err
	}
	records := make([]store.Record, 0, len(children))
	for _, child := range children {
		pod, ours := strings.CutPrefix(child, scope.Namespace+".")
		if !ours || pod == "" {
			continue
		}
		rec, found, err := s.read(ctx, dir+"/"+child)
		if err != nil {
			return nil, err
		}
		if found {
			rec.Pod = pod
			records = append(records, rec)
		}
	}
	return records, nil
}

// read gets one znode as a Record; found is false when it does not exist.
func (s *Store) read(ctx context.Context, p string) (rec store.Record, found bool, err error) {
	var data []byte
	var stat *zk.Stat
	err = s.call(ctx, "read "+p, func() (err error) {
		data, stat, err = s.conn.Get(p)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return store.Record{}, false, nil
	}
	if err != nil {
		return store.Record{}, false, err
	}
	rec = store.Record{Key: p, Revision: stat.Mzxid}
	if ep, ok := endpoint(data); ok {
		rec.Endpoint = ep
	}
	return rec, true, nil
}

// Apply writes changes in as few multi operations as MaxOps and MaxMultiBytes allow. Each
// update and delete is first checked against the znode's mzxid, then guarded in the multi by
// the version read.
func (s *Store) Apply(ctx context.Context, scope store.Scope, changes store.Changes) ([]store.Record, error) {
	if changes.Len() == 0 {
		return nil, nil
	}
	if len(changes.Create) > 0 {
		if err := s.ensurePath(ctx, s.servicePath(scope)); err != nil {
			return nil, err
		}
	}
	ops, puts, err := s.ops(ctx, scope, changes)
	if err != nil {
		return nil, err
	}
	written := make([]store.Record, 0, len(puts))
	for start, end := 0, 0; start < len(ops); start = end {
		end = s.multiEnd(ops, start)
		if err := s.multi(ctx, scope, ops[start:end]); err != nil {
			return written, err
		}
		for i := start; i < end; i++ {
			if puts[i] == nil {
				continue
			}
			rec, found, err := s.read(ctx, s.Path(scope, puts[i].Pod))
			if err != nil || !found {
				return written, fmt.Errorf("read back %s: %w", s.Path(scope, puts[i].Pod), errors.Join(err, store.ErrConflict))
			}
			rec.Endpoint, rec.Pod = *puts[i], puts[i].Pod
			written = append(written, rec)
		}
	}
	return written, nil
}

// multiEnd is where the multi that starts at ops[start] ends: at most MaxOps operations and
// MaxMultiBytes of paths and data (the first operation always goes, whatever its size).
func (s *Store) multiEnd(ops []any, start int) int {
	end, size := start, 0
	for end < len(ops) && end-start < s.opts.MaxOps {
		n := opBytes(ops[end])
		if end > start && size+n > s.opts.MaxMultiBytes {
			break
		}
		size += n
		end++
	}
	return end
}

// opOverhead bounds what an operation adds to a multi request besides its path and data (the
// operation's header, version, ACL and flags).
const opOverhead = 64

// opBytes is what op adds to a multi request, at most.
func opBytes(op any) int {
	switch o := op.(type) {
	case *zk.CreateRequest:
		return len(o.Path) + len(o.Data) + opOverhead
	case *zk.SetDataRequest:
		return len(o.Path) + len(o.Data) + opOverhead
	case *zk.DeleteRequest:
		return len(o.Path) + opOverhead
	}
	return opOverhead
}

// ops are the multi operations of changes; puts[i] is the endpoint ops[i] writes, if any.
func (s *Store) ops(ctx context.Context, scope store.Scope, c store.Changes) (ops []any, puts []*store.Endpoint, err error) {
	for i := range c.Delete {
		version, err := s.version(ctx, scope, c.Delete[i])
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, &zk.DeleteRequest{Path: s.Path(scope, c.Delete[i].Pod), Version: version})
		puts = append(puts, nil)
	}
	for i := range c.Create {
		data, err := s.encode(&c.Create[i])
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, &zk.CreateRequest{Path: s.Path(scope, c.Create[i].Pod), Data: data, Acl: zk.WorldACL(zk.PermAll)})
		puts = append(puts, &c.Create[i])
	}
	for i := range c.Update {
		u := &c.Update[i]
		version, err := s.version(ctx, scope, u.Old)
		if err != nil {
			return nil, nil, err
		}
		data, err := s.encode(&u.New)
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, &zk.SetDataRequest{Path: s.Path(scope, u.New.Pod), Data: data, Version: version})
		puts = append(puts, &u.New)
	}
	return ops, puts, nil
}

func (s *Store) encode(ep *store.Endpoint) ([]byte, error) {
	data, err := json.Marshal(s.instance(ep))
	if err != nil {
		return nil, fmt.Errorf("encode instance %s.%s: %w", ep.Namespace, ep.Pod, err)
	}
	return data, nil
}

// version reads the znode of old and returns its version, or ErrConflict when it is gone or
// changed (a different mzxid) since old was listed.
func (s *Store) version(ctx context.Context, scope store.Scope, old store.Record) (int32, error) {
	p := s.Path(scope, old.Pod)
	var stat *zk.Stat
	err := s.call(ctx, "read "+p, func() (err error) {
		_, stat, err = s.conn.Exists(p)
		return err
	})
	if err != nil {
		return 0, err
	}
	if stat == nil || stat.Mzxid != old.Revision {
		return 0, fmt.Errorf("write %s: %w", p, store.ErrConflict)
	}
	return stat.Version, nil
}

// multi runs ops atomically.
func (s *Store) multi(ctx context.Context, scope store.Scope, ops []any) error {
	what := fmt.Sprintf("write %d instances under %s", len(ops), s.servicePath(scope))
	return s.call(ctx, what, func() error {
		res, err := s.conn.Multi(ops...)
		var first error
		for _, r := range res { // the failed op's error; the ops after it fail as "inconsistent"
			if guard := conflict(r.Error); errors.Is(guard, store.ErrConflict) {
				return guard
			}
			first = cmp.Or(first, r.Error)
		}
		return cmp.Or(first, err)
	})
}

// ensurePath creates p and its parents as persistent znodes where missing.
func (s *Store) ensurePath(ctx context.Context, p string) error {
	var current string
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		current += "/" + part
		err := s.call(ctx, "create "+current, func() error {
			_, err := s.conn.Create(current, nil, 0, zk.WorldACL(zk.PermAll))
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}
