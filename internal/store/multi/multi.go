// Package multi resolves which named stores (etcd, DNS through CoreDNS, ZooKeeper) a scope is
// published to. It does no I/O: the controller plans, applies and reports each store of a
// scope on its own, with its own records, so that one store down never holds back another.
//
// A registry names its stores in spec.stores (immutable once created; empty means the
// installation's defaults): Targets resolves those names.
package multi

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/registrar-dev/registrar/internal/store"
)

// Named is one configured store.
type Named struct {
	Name  string
	Store store.Store
}

// Stores are the installation's configured stores.
type Stores struct {
	stores   map[string]store.Store
	names    []string // configuration order
	defaults []string
}

// New returns the Stores over stores (names must be unique); scopes that name no stores go
// to defaults.
func New(stores []Named, defaults []string) (*Stores, error) {
	s := &Stores{stores: map[string]store.Store{}, defaults: defaults}
	for _, n := range stores {
		if _, dup := s.stores[n.Name]; dup || n.Name == "" || n.Store == nil {
			return nil, fmt.Errorf("store name %q is empty, has no store or is configured twice", n.Name)
		}
		s.stores[n.Name] = n.Store
		s.names = append(s.names, n.Name)
	}
	if targets, err := s.Targets(nil); err != nil || len(targets) == 0 {
		return nil, fmt.Errorf("default stores %q: %w", defaults, errors.Join(err, errors.New("none configured")))
	}
	return s, nil
}

// Names are the configured stores, in configuration order.
func (s *Stores) Names() []string { return slices.Clone(s.names) }

// All are the configured stores, in configuration order.
func (s *Stores) All() []Named {
	out := make([]Named, len(s.names))
	for i, n := range s.names {
		out[i] = Named{Name: n, Store: s.stores[n]}
	}
	return out
}

// ErrNotConfigured is returned by Targets when a scope names a store the installation does
// not configure. The configured ones are returned all the same, so that the records of a
// registry naming such a store can still be written and removed.
var ErrNotConfigured = errors.New("store not configured")

// Targets are the configured stores of the names (a registry's spec.stores), in their
// order; no names are the installation's defaults. err names those that are not configured.
func (s *Stores) Targets(names []string) (targets []Named, err error) {
	all := s.defaults
	if len(names) > 0 {
		all = names
	}
	var missing []string
	for _, n := range all {
		if s.stores[n] == nil {
			missing = append(missing, n)
		} else if !slices.ContainsFunc(targets, func(t Named) bool { return t.Name == n }) {
			targets = append(targets, Named{Name: n, Store: s.stores[n]})
		}
	}
	if len(missing) > 0 {
		err = fmt.Errorf("%w: %q named but this installation configures only %s (its --stores flag)",
			ErrNotConfigured, missing, strings.Join(s.names, ", "))
	}
	return targets, err
}
