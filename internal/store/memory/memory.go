// Package memory is an in-memory store.Store that enforces the contract the real backends
// do (after external-dns's provider/inmemory): one revision counter, create-if-absent,
// updates and deletes guarded by revision (store.ErrConflict), all-or-nothing batches of at
// most MaxTxnOps operations (a larger change is split, as etcd's is), a Watcher of every
// change and a Scanner of every record. It is for tests: fast unit tests of the controller's
// sync logic, and a reference of the conformance suite (internal/store/storetest).
package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/registrar-dev/registrar/internal/store"
)

// DefaultMaxTxnOps is etcd's default --max-txn-ops.
const DefaultMaxTxnOps = 128

// Store holds records in memory.
type Store struct {
	mu        sync.Mutex
	rev       int64
	records   map[string]store.Record // by key
	maxTxnOps int
	watchers  map[int]chan store.Change
	nextWatch int
	// fail, when set, is returned by every call (a store that is down).
	fail error
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Watcher = (*Store)(nil)
	_ store.Scanner = (*Store)(nil)
)

// New returns an empty Store; maxTxnOps ≤ 0 means DefaultMaxTxnOps.
func New(maxTxnOps int) *Store {
	if maxTxnOps <= 0 {
		maxTxnOps = DefaultMaxTxnOps
	}
	return &Store{records: map[string]store.Record{}, maxTxnOps: maxTxnOps, watchers: map[int]chan store.Change{}}
}

// Fail makes every later call return err (nil: the store answers again).
func (s *Store) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

func key(scope store.Scope, pod string) string {
	return path.Join("/", scope.Service, scope.Namespace, pod)
}

func checkScope(scope store.Scope) error {
	for _, seg := range []string{scope.Service, scope.Namespace} {
		if seg == "" || strings.Contains(seg, "/") || seg == "." || seg == ".." {
			return fmt.Errorf("invalid scope %q/%q", scope.Service, scope.Namespace)
		}
	}
	return nil
}

// List returns every record of scope, whoever owns it.
func (s *Store) List(_ context.Context, scope store.Scope) ([]store.Record, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	prefix := key(scope, "") + "/"
	var out []store.Record
	for _, k := range slices.Sorted(maps.Keys(s.records)) {
		if strings.HasPrefix(k, prefix) {
			out = append(out, clone(s.records[k]))
		}
	}
	return out, nil
}

// ListAll returns every record of every scope.
func (s *Store) ListAll(context.Context) ([]store.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	out := make([]store.Record, 0, len(s.records))
	for _, k := range slices.Sorted(maps.Keys(s.records)) {
		out = append(out, clone(s.records[k]))
	}
	return out, nil
}

func clone(r store.Record) store.Record {
	r.Ports = maps.Clone(r.Ports)
	return r
}

// op is one guarded write.
type op struct {
	key    string
	pod    string
	create bool
	rev    int64 // guard of an update or delete
	put    *store.Endpoint
}

// Apply writes changes in batches of at most MaxTxnOps operations, each all or nothing.
func (s *Store) Apply(_ context.Context, scope store.Scope, c store.Changes) ([]store.Record, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	ops := make([]op, 0, c.Len())
	for _, d := range c.Delete {
		ops = append(ops, op{key: key(scope, d.Pod), pod: d.Pod, rev: d.Revision})
	}
	for i := range c.Create {
		ops = append(ops, op{key: key(scope, c.Create[i].Pod), pod: c.Create[i].Pod, create: true, put: &c.Create[i]})
	}
	for i := range c.Update {
		ops = append(ops, op{key: key(scope, c.Update[i].New.Pod), pod: c.Update[i].New.Pod, rev: c.Update[i].Old.Revision, put: &c.Update[i].New})
	}
	var written []store.Record
	for start := 0; start < len(ops); start += s.maxTxnOps {
		w, err := s.commit(ops[start:min(start+s.maxTxnOps, len(ops))])
		written = append(written, w...)
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

func (s *Store) commit(batch []op) ([]store.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	for _, o := range batch {
		cur, exists := s.records[o.key]
		if (o.create && exists) || (!o.create && (!exists || cur.Revision != o.rev)) {
			return nil, fmt.Errorf("write %d keys: %s: %w", len(batch), o.key, store.ErrConflict)
		}
	}
	s.rev++
	var written []store.Record
	for _, o := range batch {
		c := store.Change{Pod: o.pod, Revision: s.rev}
		parts := strings.Split(strings.Trim(o.key, "/"), "/")
		c.Service, c.Namespace = parts[0], parts[1]
		if o.put == nil {
			delete(s.records, o.key)
			c.Deleted = true
		} else {
			rec := store.Record{Endpoint: *o.put, Key: o.key, Revision: s.rev}
			rec.Ports = maps.Clone(rec.Ports)
			s.records[o.key] = rec
			written = append(written, clone(rec))
		}
		s.notify(c)
	}
	return written, nil
}

// notify hands c to every watcher; s.mu is held. A watcher whose buffer is full loses the
// change, as a lagging etcd watch would: it is told to re-read (see Watch).
func (s *Store) notify(c store.Change) {
	for _, ch := range s.watchers {
		select {
		case ch <- c:
		default:
			select {
			case ch <- store.Change{}: // the empty change: some were missed
			default:
			}
		}
	}
}

// Watch reports every change until ctx ends; missed is called when changes were dropped.
func (s *Store) Watch(ctx context.Context, changed func(store.Change), missed func()) error {
	ch := make(chan store.Change, 1024)
	s.mu.Lock()
	id := s.nextWatch
	s.nextWatch++
	s.watchers[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, id)
		s.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case c := <-ch:
			if c == (store.Change{}) {
				missed()
			} else {
				changed(c)
			}
		}
	}
}

// Tamper changes the store as something other than registrar would: it puts ep at pod's key
// (nil deletes it), bumping the revision and notifying watchers. It returns the change.
func (s *Store) Tamper(scope store.Scope, pod string, ep *store.Endpoint) store.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(scope, pod)
	s.rev++
	c := store.Change{Service: scope.Service, Namespace: scope.Namespace, Pod: pod, Revision: s.rev}
	if ep == nil {
		delete(s.records, k)
		c.Deleted = true
	} else {
		s.records[k] = store.Record{Endpoint: *ep, Key: k, Revision: s.rev}
	}
	s.notify(c)
	return c
}

// ErrDown is a convenient error for Fail.
var ErrDown = errors.New("memory store: down")
