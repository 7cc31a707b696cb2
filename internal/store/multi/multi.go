// Package multi publishes one ServiceRegistry to several named stores at once (etcd, DNS
// through CoreDNS, ZooKeeper) behind the single store.Store the controller uses.
//
// A scope's stores are named by Scope.Stores (comma-separated; empty means the installation's
// defaults). With one target store, List and Apply go straight to it. With several, List
// returns a merged view: a pod whose records agree in every store is listed as the first
// store's record; a pod missing from some store, or whose records differ, is listed without
// its UID and address, so the controller's plan rewrites (or deletes) it; a pod another owner
// holds in any store is listed with no owner, so nobody touches it. Apply re-plans the
// changed pods against each store's own records (with that store's revisions, so writes stay
// fenced per store) and writes every store even when one fails: a DNS outage does not hold
// back etcd. Errors name the store.
package multi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/store"
)

// Named is one configured store.
type Named struct {
	Name  string
	Store store.Store
}

// State is what one store of a scope held after its last List or Apply.
type State struct {
	Name string
	// Registered counts the records of the owner asked about.
	Registered int
	// Err is the last List or Apply error, nil once a later one succeeded.
	Err error
}

// Store fans out to the named stores.
type Store struct {
	stores   map[string]store.Store
	names    []string // configuration order
	defaults []string
	mu       sync.Mutex
	seen     map[key]*seen
}

// key is one store of one scope.
type key struct {
	scope store.Scope
	name  string
}

// seen is what a store held in a scope after the last call, and how that call went.
type seen struct {
	records map[string]store.Record // nil after an error: list before writing again
	err     error
}

var _ store.Store = (*Store)(nil)

// New returns a Store over stores (names must be unique); scopes that name no stores go to
// defaults.
func New(stores []Named, defaults []string) (*Store, error) {
	s := &Store{stores: map[string]store.Store{}, defaults: defaults, seen: map[key]*seen{}}
	for _, n := range stores {
		if _, dup := s.stores[n.Name]; dup || n.Name == "" {
			return nil, fmt.Errorf("store name %q is empty or configured twice", n.Name)
		}
		s.stores[n.Name] = n.Store
		s.names = append(s.names, n.Name)
	}
	if names, err := s.targets(store.Scope{}); err != nil || len(names) == 0 {
		return nil, fmt.Errorf("default stores %q: %w", defaults, errors.Join(err, errors.New("none configured")))
	}
	return s, nil
}

// Names are the configured stores, in configuration order.
func (s *Store) Names() []string { return slices.Clone(s.names) }

// ErrNotConfigured is returned by List when a scope names a store the installation does not
// configure. The configured ones are listed all the same (and Apply writes them), so that
// the records of a registry naming such a store can still be removed.
var ErrNotConfigured = errors.New("store not configured")

// targets are the configured store names of scope; err names those that are not configured.
func (s *Store) targets(scope store.Scope) (names []string, err error) {
	all := s.defaults
	if scope.Stores != "" {
		all = strings.Split(scope.Stores, ",")
	}
	var missing []string
	for _, n := range all {
		if s.stores[n] == nil {
			missing = append(missing, n)
		} else {
			names = append(names, n)
		}
	}
	if len(missing) > 0 {
		err = fmt.Errorf("%w: %q named but this installation configures only %s (its --stores flag)",
			ErrNotConfigured, missing, strings.Join(s.names, ", "))
	}
	return names, err
}

// List lists every target store of scope and returns the merged view.
func (s *Store) List(ctx context.Context, scope store.Scope) ([]store.Record, error) {
	names, notConfigured := s.targets(scope)
	lists := make([]map[string]store.Record, len(names))
	errs := []error{notConfigured}
	var err error
	for i, name := range names {
		if lists[i], err = s.list(ctx, scope, name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 1 { // a store failed
		return nil, errors.Join(errs...)
	}
	if len(names) == 1 {
		return slices.Collect(maps.Values(lists[0])), notConfigured
	}
	return slices.Collect(maps.Values(merge(lists, nil))), notConfigured
}

func (s *Store) list(ctx context.Context, scope store.Scope, name string) (map[string]store.Record, error) {
	recs, err := s.stores[name].List(ctx, scope)
	if err != nil {
		err = fmt.Errorf("store %s: %w", name, err)
		s.remember(scope, name, nil, err)
		return nil, err
	}
	byPod := make(map[string]store.Record, len(recs))
	for _, r := range recs {
		byPod[r.Pod] = r
	}
	s.remember(scope, name, byPod, nil)
	return byPod, nil
}

func (s *Store) remember(scope store.Scope, name string, records map[string]store.Record, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[key{scope, name}] = &seen{records: records, err: err}
}

// known returns a copy of the records last seen in a store, or false.
func (s *Store) known(scope store.Scope, name string) (map[string]store.Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.seen[key{scope, name}]
	if e == nil || e.records == nil {
		return nil, false
	}
	return maps.Clone(e.records), true
}

// merge combines the stores' records of the pods in only (all pods when only is nil).
func merge(lists []map[string]store.Record, only map[string]bool) map[string]store.Record {
	out := map[string]store.Record{}
	for _, l := range lists {
		for pod := range l {
			if _, done := out[pod]; done || (only != nil && !only[pod]) {
				continue
			}
			out[pod] = mergePod(lists, pod)
		}
	}
	return out
}

func mergePod(lists []map[string]store.Record, pod string) store.Record {
	var first *store.Record
	complete := true
	for _, l := range lists {
		r, ok := l[pod]
		switch {
		case !ok:
			complete = false
		case first == nil:
			first = &r
		case r.Owner != first.Owner || r.Owner == "":
			return store.Record{Endpoint: store.Endpoint{Pod: pod}} // nobody's: never touched
		case !plan.Same(r.Endpoint, first.Endpoint):
			complete = false
		}
	}
	out := *first
	if out.Owner == "" {
		return store.Record{Key: out.Key, Endpoint: store.Endpoint{Pod: pod}}
	}
	if !complete { // not the same everywhere: plans an update (or a delete), never counts as stored
		out.UID, out.Address = "", ""
	}
	return out
}

// States reports, for each target store of scope, how many records of owner it held after
// the last call and whether that call failed. A store not called yet counts nothing.
func (s *Store) States(scope store.Scope, owner string) []State {
	names, _ := s.targets(scope)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]State, 0, len(names))
	for _, name := range names {
		st := State{Name: name}
		if e := s.seen[key{scope, name}]; e != nil {
			st.Err = e.err
			for _, r := range e.records {
				if r.Owner == owner {
					st.Registered++
				}
			}
		}
		out = append(out, st)
	}
	return out
}
