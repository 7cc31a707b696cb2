package multi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/store"
)

// Apply writes changes to every target store of scope. With one store the changes go as
// they are; with several, each store gets the writes that make its records of the changed
// pods equal to the changes' outcome, guarded by its own revisions. Every store is written
// even when another fails; the error names each failing store.
func (s *Store) Apply(ctx context.Context, scope store.Scope, changes store.Changes) ([]store.Record, error) {
	names, _ := s.targets(scope) // List reported the stores not configured
	if len(names) == 0 {
		return nil, nil
	}
	if len(names) == 1 {
		return s.applyOne(ctx, scope, names[0], changes)
	}
	owner, desired, pods := outcome(changes)
	lists := make([]map[string]store.Record, len(names))
	var errs []error
	var err error
	for i, name := range names {
		if lists[i], err = s.replan(ctx, scope, name, owner, desired, pods); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	merged := merge(lists, pods)
	written := make([]store.Record, 0, len(desired))
	for _, pod := range slices.Sorted(maps.Keys(desired)) {
		if r, ok := merged[pod]; ok {
			written = append(written, r)
		}
	}
	return written, nil
}

// applyOne passes changes through to a single store and keeps its records up to date.
func (s *Store) applyOne(ctx context.Context, scope store.Scope, name string, changes store.Changes) ([]store.Record, error) {
	written, err := s.stores[name].Apply(ctx, scope, changes)
	if err != nil {
		err = fmt.Errorf("store %s: %w", name, err)
		s.remember(scope, name, nil, err)
		return written, err
	}
	if records, ok := s.known(scope, name); ok {
		for _, d := range changes.Delete {
			delete(records, d.Pod)
		}
		for _, w := range written {
			records[w.Pod] = w
		}
		s.remember(scope, name, records, nil)
	}
	return written, nil
}

// outcome is what changes ask for: the owner, the endpoints wanted, and every pod touched.
func outcome(c store.Changes) (owner string, desired map[string]store.Endpoint, pods map[string]bool) {
	desired, pods = map[string]store.Endpoint{}, map[string]bool{}
	for _, e := range c.Create {
		desired[e.Pod], pods[e.Pod], owner = e, true, e.Owner
	}
	for _, u := range c.Update {
		desired[u.New.Pod], pods[u.New.Pod], owner = u.New, true, u.New.Owner
	}
	for _, d := range c.Delete {
		pods[d.Pod] = true
		if owner == "" {
			owner = d.Owner
		}
	}
	return owner, desired, pods
}

// replan makes one store's records of pods equal to desired and returns its records after.
func (s *Store) replan(ctx context.Context, scope store.Scope, name, owner string, desired map[string]store.Endpoint, pods map[string]bool) (map[string]store.Record, error) {
	records, ok := s.known(scope, name)
	if !ok {
		var err error
		if records, err = s.list(ctx, scope, name); err != nil {
			return nil, err
		}
	}
	current := map[string]store.Record{}
	for pod := range pods {
		if r, ok := records[pod]; ok {
			current[pod] = r
		}
	}
	p := plan.Compute(owner, desired, current, time.Now())
	keepRegisteredAt(&p.Changes, desired)
	if p.Changes.Len() == 0 {
		return records, nil
	}
	if _, err := s.applyOne(ctx, scope, name, p.Changes); err != nil {
		return nil, err
	}
	after, _ := s.known(scope, name)
	return after, nil
}

// keepRegisteredAt writes the registration time the controller planned, so that every store
// carries the same one.
func keepRegisteredAt(c *store.Changes, desired map[string]store.Endpoint) {
	for i := range c.Create {
		c.Create[i].RegisteredAt = desired[c.Create[i].Pod].RegisteredAt
	}
	for i := range c.Update {
		c.Update[i].New.RegisteredAt = desired[c.Update[i].New.Pod].RegisteredAt
	}
}
