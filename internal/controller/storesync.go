package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/echo"
	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/multi"
)

// storeResult is what one target store of a registry held after a sync, and how it went.
type storeResult struct {
	name string
	// records are every record of the scope in the store after the sync; nil when unknown
	// (the store failed).
	records map[string]store.Record
	plan    plan.Plan
	err     error
}

// targets are the stores of scope: the named ones it goes to, or the single Store.
func (r *ServiceRegistryReconciler) targets(scope store.Scope) ([]multi.Named, error) {
	if r.Stores == nil {
		return []multi.Named{{Store: r.Store}}, nil
	}
	return r.Stores.Targets(scope)
}

// storeErr names the store in err when there are several.
func storeErr(name string, err error) error {
	if name == "" || err == nil {
		return err
	}
	return fmt.Errorf("store %s: %w", name, err)
}

// sync makes the registry's records in every target store equal to s.desired. Each store is
// planned against its own records and applied on its own, all at once: one store that fails
// or hangs never holds back another. The error joins those of the stores that failed.
func (r *ServiceRegistryReconciler) sync(ctx context.Context, s *reconcileScope) error {
	targets, notConfigured := r.targets(s.target)
	now := r.Clock.Now()
	s.stores = make([]storeResult, len(targets))
	if len(targets) == 1 { // the common case: no goroutine on the reconcile path
		s.stores[0] = r.syncStore(ctx, s, targets[0], now)
	} else {
		var wg sync.WaitGroup
		for i, t := range targets {
			wg.Go(func() { s.stores[i] = r.syncStore(ctx, s, t, now) })
		}
		wg.Wait()
	}
	errs := []error{notConfigured}
	var done []storeResult
	conflicts := map[string]bool{}
	for _, res := range s.stores {
		for _, pod := range res.plan.Conflicts {
			conflicts[pod] = true
		}
		if res.err != nil {
			errs = append(errs, res.err)
			continue
		}
		done = append(done, res)
	}
	s.plan = plan.Plan{Changes: unionChanges(done), Conflicts: slices.Sorted(maps.Keys(conflicts))}
	s.stored = storedEverywhere(string(s.reg.UID), done)
	if s.plan.Changes.Len() > 0 {
		r.recordChanges(s, s.plan.Changes)
	}
	return errors.Join(errs...)
}

// syncStore makes one store's records of the registry equal to s.desired.
func (r *ServiceRegistryReconciler) syncStore(ctx context.Context, s *reconcileScope, t multi.Named, now time.Time) storeResult {
	name := client.ObjectKeyFromObject(s.reg)
	owner := string(s.reg.UID)
	res := storeResult{name: t.Name}
	current, drift, err := r.current(ctx, name, t, s.reg.UID, s.target)
	if err != nil {
		res.err = storeErr(t.Name, err)
		return res
	}
	weigh := weigherOf(s.reg, now)
	p := plan.ComputeWeighted(owner, s.desired, current, now, weigh)
	if len(p.Conflicts) > 0 {
		// The other owner may have released its keys since they were read: read them again.
		r.known.forgetStore(name, t.Name)
		if current, _, err = r.current(ctx, name, t, s.reg.UID, s.target); err != nil {
			res.err = storeErr(t.Name, err)
			return res
		}
		p = plan.ComputeWeighted(owner, s.desired, current, now, weigh)
	}
	res.plan, res.records = p, current
	if p.Changes.Len() == 0 {
		return res
	}
	// The store's watch reports this write too, maybe before Apply returns: until its outcome
	// is in r.known, a watch event of these keys is rechecked later (antiEntropy.changed),
	// not taken for somebody else's change.
	end := r.writes.Begin(writeKeys(t.Name, s.target, p.Changes))
	written, err := t.Store.Apply(ctx, s.target, p.Changes)
	if err != nil {
		r.known.forgetStore(name, t.Name) // outcome unknown: list again before the next write
		end()
		res.records = nil
		res.err = storeErr(t.Name, fmt.Errorf("apply %d changes to service %s/%s: %w", p.Changes.Len(), s.target.Service, s.target.Namespace, err))
		return res
	}
	current = applied(current, p.Changes, written)
	r.known.set(name, t.Name, s.reg.UID, s.target, current)
	end()
	r.countRepairs(s, t.Name, p.Changes, drift)
	res.records = current
	log.FromContext(ctx).V(1).Info("store updated", "store", t.Name, "service", s.target.Service,
		"created", len(p.Changes.Create), "updated", len(p.Changes.Update), "deleted", len(p.Changes.Delete))
	return res
}

// writeKeys are the store keys changes write in one store.
func writeKeys(storeName string, scope store.Scope, changes store.Changes) []echo.Key {
	keys := make([]echo.Key, 0, changes.Len())
	key := func(pod string) echo.Key {
		return echo.Key{Store: storeName, Service: scope.Service, Namespace: scope.Namespace, Pod: pod}
	}
	for _, ep := range changes.Create {
		keys = append(keys, key(ep.Pod))
	}
	for _, u := range changes.Update {
		keys = append(keys, key(u.New.Pod))
	}
	for _, rec := range changes.Delete {
		keys = append(keys, key(rec.Pod))
	}
	return keys
}

// current returns every record in scope in one store: from memory when known and not
// stale, else listed. drift are the pods whose listed record differs from what was known
// (a stale view re-read: something else changed the store).
func (r *ServiceRegistryReconciler) current(ctx context.Context, name types.NamespacedName, t multi.Named, uid types.UID, target store.Scope) (records map[string]store.Record, drift map[string]bool, err error) {
	known, stale, ok := r.known.get(name, t.Name, uid, target)
	if ok && !stale {
		return known, nil, nil
	}
	listed, err := t.Store.List(ctx, target)
	if err != nil {
		return nil, nil, err
	}
	records = byPod(listed)
	if ok {
		drift = diffPods(known, records)
	}
	r.known.set(name, t.Name, uid, target, records)
	copied, _, _ := r.known.get(name, t.Name, uid, target)
	return copied, drift, nil
}

// diffPods are the pods whose record is in only one of a and b, or at another revision.
func diffPods(a, b map[string]store.Record) map[string]bool {
	out := map[string]bool{}
	for pod, ra := range a {
		if rb, ok := b[pod]; !ok || rb.Revision != ra.Revision {
			out[pod] = true
		}
	}
	for pod := range b {
		if _, ok := a[pod]; !ok {
			out[pod] = true
		}
	}
	return out
}

// unionChanges are the changes the stores made, one per pod: what a person sees as one
// registration or deregistration, however many stores carry it.
func unionChanges(results []storeResult) store.Changes {
	var out store.Changes
	created, deleted := map[string]bool{}, map[string]bool{}
	for _, res := range results {
		for _, ep := range res.plan.Changes.Create {
			if !created[ep.Pod] {
				created[ep.Pod] = true
				out.Create = append(out.Create, ep)
			}
		}
		for _, rec := range res.plan.Changes.Delete {
			if !deleted[rec.Pod] {
				deleted[rec.Pod] = true
				out.Delete = append(out.Delete, rec)
			}
		}
		out.Update = append(out.Update, res.plan.Changes.Update...)
	}
	return out
}

// storedEverywhere are the owner's records that every store of results holds alike (nil
// when no store answered): an endpoint counts as stored only once each store has it. A
// slow-start weight that differs between stores (one wrote the next step, another failed)
// does not make it less stored.
func storedEverywhere(owner string, results []storeResult) map[string]store.Record {
	if len(results) == 0 {
		return nil
	}
	first := results[0].records
	if len(results) == 1 && first != nil && allOwned(owner, first) {
		// The common case, shared rather than copied (gateAcks keeps it): nothing modifies a
		// store result's records once syncStore returns them (knownRecords keeps them as set
		// and hands out copies).
		return first
	}
	out := plan.Owned(owner, first)
	for _, res := range results[1:] {
		for pod, rec := range out {
			if other, ok := res.records[pod]; !ok || other.Owner != owner || !plan.SameInstance(other.Endpoint, rec.Endpoint) {
				delete(out, pod)
			}
		}
	}
	return out
}

// allOwned reports whether every record has this owner.
func allOwned(owner string, records map[string]store.Record) bool {
	for _, rec := range records {
		if rec.Owner != owner {
			return false
		}
	}
	return true
}

// removeOwned deletes every record of reg in scope from each of its stores (a store the
// installation does not configure holds nothing to remove). Every store is tried.
func (r *ServiceRegistryReconciler) removeOwned(ctx context.Context, reg *v1beta1.ServiceRegistry, target store.Scope) error {
	targets, _ := r.targets(target)
	var errs []error
	for _, t := range targets {
		listed, err := t.Store.List(ctx, target)
		if err != nil {
			errs = append(errs, storeErr(t.Name, err))
			continue
		}
		p := plan.Compute(string(reg.UID), nil, byPod(listed), r.Clock.Now())
		if p.Changes.Len() == 0 {
			continue
		}
		if _, err := t.Store.Apply(ctx, target, p.Changes); err != nil {
			errs = append(errs, storeErr(t.Name, fmt.Errorf("remove %d endpoints of service %s/%s: %w", p.Changes.Len(), target.Service, target.Namespace, err)))
		}
	}
	return errors.Join(errs...)
}
