// Package storesync owns what registrar knows of the stores and how it writes them: the known
// records of every registry in every store (planned against instead of listing the store on
// each reconcile), the fan-out of one registry's changes to each of its stores (planned and
// applied on its own, so that one store down never holds back another), anti-entropy (the
// stores' watches and the periodic re-read that keep the known records true) and the removal
// of records left under a registry's earlier service names. The reconciler decides what each
// registry's stores should hold (the desired endpoints); a Syncer makes them hold it and says
// what they hold (Statuses: status.stores). Nothing outside reaches into its state: only its
// methods.
package storesync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/echo"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/multi"
)

// StoreResult is what one target store of a registry held after a sync, and how it went.
type StoreResult struct {
	Name string
	// Records are every record of the scope in the store after the sync; nil when unknown
	// (the store failed).
	Records map[string]store.Record
	Plan    plan.Plan
	Err     error
}

// Config is what a Syncer writes to and reports through.
type Config struct {
	// Stores are the installation's named stores: each registry goes to those its
	// spec.stores names (else the defaults).
	Stores *multi.Stores
	// Clock stamps registeredAt (plan) and times the retries of a failed store search.
	Clock clock.PassiveClock
	// Recorder reports repairs (an Event on the registry).
	Recorder recorder.EventRecorder
}

// Syncer makes the stores hold each registry's desired endpoints and remembers what they
// hold (see the package comment). Safe for concurrent reconciles of different registries.
type Syncer struct {
	stores   *multi.Stores
	clock    clock.PassiveClock
	recorder recorder.EventRecorder
	known    *knownRecords
	owners   *ownerIndex
	// writes are the store keys being written (their watch events are echoes: AntiEntropy).
	writes *echo.Writes
}

// New returns a Syncer that knows nothing yet: the first reconcile of each registry lists.
func New(cfg Config) *Syncer {
	return &Syncer{stores: cfg.Stores, clock: cfg.Clock, recorder: cfg.Recorder,
		known: newKnownRecords(), owners: newOwnerIndex(), writes: echo.NewWrites()}
}

// Request is one registry's sync: its desired endpoints in its scope.
type Request struct {
	Registry *v1beta1.ServiceRegistry
	Target   store.Scope
	Desired  map[string]store.Endpoint
	// Weigher gives the slow-start weights at the sync's time (nil: none).
	Weigher func(now time.Time) plan.Weigher
}

// Result is what a sync did.
type Result struct {
	// Stores is what each target store held after the sync.
	Stores []StoreResult
	// Plan is the union of the changes the stores made (one per pod) and the conflicts.
	Plan plan.Plan
	// Stored are the registry's own records every store that answered holds alike.
	Stored map[string]store.Record
}

// allStores are every configured store.
func (y *Syncer) allStores() []multi.Named { return y.stores.All() }

// targets are the named stores the registry publishes to (its spec.stores, immutable).
func (y *Syncer) targets(reg *v1beta1.ServiceRegistry) ([]multi.Named, error) {
	return y.stores.Targets(reg.Spec.Stores)
}

// storeErr names the store in err when there are several.
func storeErr(name string, err error) error {
	if name == "" || err == nil {
		return err
	}
	return fmt.Errorf("store %s: %w", name, err)
}

// Sync makes the registry's records in every target store equal to req.Desired. Each store
// is planned against its own records and applied on its own, all at once: one store that
// fails or hangs never holds back another. The error joins those of the stores that failed.
func (y *Syncer) Sync(ctx context.Context, req Request) (Result, error) {
	targets, notConfigured := y.targets(req.Registry)
	now := y.clock.Now()
	var res Result
	res.Stores = make([]StoreResult, len(targets))
	if len(targets) == 1 { // the common case: no goroutine on the reconcile path
		res.Stores[0] = y.syncStore(ctx, req, targets[0], now)
	} else {
		var wg sync.WaitGroup
		for i, t := range targets {
			wg.Go(func() { res.Stores[i] = y.syncStore(ctx, req, t, now) })
		}
		wg.Wait()
	}
	errs := []error{notConfigured}
	var done []StoreResult
	conflicts := map[string]bool{}
	for _, sr := range res.Stores {
		for _, pod := range sr.Plan.Conflicts {
			conflicts[pod] = true
		}
		if sr.Err != nil {
			errs = append(errs, sr.Err)
			continue
		}
		done = append(done, sr)
	}
	res.Plan = plan.Plan{Changes: unionChanges(done), Conflicts: slices.Sorted(maps.Keys(conflicts))}
	res.Stored = storedEverywhere(string(req.Registry.UID), done)
	return res, errors.Join(errs...)
}

// syncStore makes one store's records of the registry equal to req.Desired.
func (y *Syncer) syncStore(ctx context.Context, req Request, t multi.Named, now time.Time) StoreResult {
	reg := req.Registry
	name := client.ObjectKeyFromObject(reg)
	owner := string(reg.UID)
	res := StoreResult{Name: t.Name}
	current, drift, err := y.current(ctx, name, t, reg.UID, req.Target)
	if err != nil {
		res.Err = storeErr(t.Name, err)
		return res
	}
	var weigh plan.Weigher
	if req.Weigher != nil {
		weigh = req.Weigher(now)
	}
	p := plan.ComputeWeighted(owner, req.Desired, current, now, weigh)
	if len(p.Conflicts) > 0 {
		// The other owner may have released its keys since they were read: read them again.
		y.known.forgetStore(name, t.Name)
		if current, _, err = y.current(ctx, name, t, reg.UID, req.Target); err != nil {
			res.Err = storeErr(t.Name, err)
			return res
		}
		p = plan.ComputeWeighted(owner, req.Desired, current, now, weigh)
	}
	res.Plan, res.Records = p, current
	if p.Changes.Len() == 0 {
		return res
	}
	// The store's watch reports this write too, maybe before Apply returns: until its outcome
	// is in y.known, a watch event of these keys is rechecked later (AntiEntropy.changed),
	// not taken for somebody else's change.
	end := y.writes.Begin(writeKeys(t.Name, req.Target, p.Changes))
	written, err := t.Store.Apply(ctx, req.Target, p.Changes)
	if err != nil {
		y.known.forgetStore(name, t.Name) // outcome unknown: list again before the next write
		end()
		res.Records = nil
		res.Err = storeErr(t.Name, fmt.Errorf("apply %d changes to service %s/%s: %w", p.Changes.Len(), req.Target.Service, req.Target.Namespace, err))
		return res
	}
	current = applied(current, p.Changes, written)
	y.known.set(name, t.Name, reg.UID, req.Target, current)
	end()
	y.countRepairs(reg, req.Target, t.Name, p.Changes, drift)
	res.Records = current
	log.FromContext(ctx).V(1).Info("store updated", "store", t.Name, "service", req.Target.Service,
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
func (y *Syncer) current(ctx context.Context, name types.NamespacedName, t multi.Named, uid types.UID, target store.Scope) (records map[string]store.Record, drift map[string]bool, err error) {
	known, stale, ok := y.known.get(name, t.Name, uid, target)
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
	y.known.set(name, t.Name, uid, target, records)
	copied, _, _ := y.known.get(name, t.Name, uid, target)
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
func unionChanges(results []StoreResult) store.Changes {
	var out store.Changes
	created, deleted := map[string]bool{}, map[string]bool{}
	for _, res := range results {
		for _, ep := range res.Plan.Changes.Create {
			if !created[ep.Pod] {
				created[ep.Pod] = true
				out.Create = append(out.Create, ep)
			}
		}
		for _, rec := range res.Plan.Changes.Delete {
			if !deleted[rec.Pod] {
				deleted[rec.Pod] = true
				out.Delete = append(out.Delete, rec)
			}
		}
		out.Update = append(out.Update, res.Plan.Changes.Update...)
	}
	return out
}

// storedEverywhere are the owner's records that every store of results holds alike (nil
// when no store answered): an endpoint counts as stored only once each store has it. A
// slow-start weight that differs between stores (one wrote the next step, another failed)
// does not make it less stored.
func storedEverywhere(owner string, results []StoreResult) map[string]store.Record {
	if len(results) == 0 {
		return nil
	}
	first := results[0].Records
	if len(results) == 1 && first != nil && allOwned(owner, first) {
		// The common case, shared rather than copied (gateAcks keeps it): nothing modifies a
		// store result's records once syncStore returns them (knownRecords keeps them as set
		// and hands out copies).
		return first
	}
	out := plan.Owned(owner, first)
	for _, res := range results[1:] {
		for pod, rec := range out {
			if other, ok := res.Records[pod]; !ok || other.Owner != owner || !plan.SameInstance(other.Endpoint, rec.Endpoint) {
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

// RemoveOwned deletes every record of reg in scope from each of its stores (a store the
// installation does not configure holds nothing to remove). Every store is tried.
func (y *Syncer) RemoveOwned(ctx context.Context, reg *v1beta1.ServiceRegistry, target store.Scope) error {
	targets, _ := y.targets(reg)
	var errs []error
	for _, t := range targets {
		listed, err := t.Store.List(ctx, target)
		if err != nil {
			errs = append(errs, storeErr(t.Name, err))
			continue
		}
		p := plan.Compute(string(reg.UID), nil, byPod(listed), y.clock.Now())
		if p.Changes.Len() == 0 {
			continue
		}
		if _, err := t.Store.Apply(ctx, target, p.Changes); err != nil {
			errs = append(errs, storeErr(t.Name, fmt.Errorf("remove %d endpoints of service %s/%s: %w", p.Changes.Len(), target.Service, target.Namespace, err)))
		}
	}
	return errors.Join(errs...)
}

// OwnedAnywhere is the registry's own records in any of its stores, by pod: a record that
// only one store holds still names a pod whose endpoint must be judged. A store that cannot
// be read is skipped (its own sync fails and reports it); an error only when none answers.
func (y *Syncer) OwnedAnywhere(ctx context.Context, reg *v1beta1.ServiceRegistry, target store.Scope) (map[string]store.Record, error) {
	targets, notConfigured := y.targets(reg)
	owned := map[string]store.Record{}
	var errs []error
	for _, t := range targets {
		current, _, err := y.current(ctx, client.ObjectKeyFromObject(reg), t, reg.UID, target)
		if err != nil {
			errs = append(errs, storeErr(t.Name, err))
			continue
		}
		for pod, rec := range plan.Owned(string(reg.UID), current) {
			owned[pod] = rec
		}
	}
	if len(errs) > 0 && len(errs) == len(targets) {
		return nil, errors.Join(append(errs, notConfigured)...)
	}
	return owned, nil
}

// MarkRecorded sets out[pod] for each of the registry's pods (podUIDs: pod name → UID) whose
// record the Syncer knows to be in a store: the records it last read or wrote, in any store
// whose records are current (not waiting for a re-read after a failed write).
func (y *Syncer) MarkRecorded(name types.NamespacedName, uid types.UID, podUIDs map[string]string, out map[string]bool) {
	y.known.markRecorded(name, uid, podUIDs, out)
}

// ForgetRecords drops what is known of the registry in every store: its next sync lists.
func (y *Syncer) ForgetRecords(name types.NamespacedName) { y.known.forget(name) }

// Forget drops everything held of a registry that is gone.
func (y *Syncer) Forget(name types.NamespacedName) {
	y.known.forget(name)
	y.owners.forget(name)
}

// ForgetNamespaces drops what is known of the registries of the namespaces in (a shard
// given up).
func (y *Syncer) ForgetNamespaces(in func(namespace string) bool) { y.known.forgetNamespaces(in) }

// countRepairs counts the applied changes of pods whose record drifted (changed by anything
// but this operator) as repairs, and reports them in an Event on the registry.
func (y *Syncer) countRepairs(reg *v1beta1.ServiceRegistry, target store.Scope, storeName string, c store.Changes, drift map[string]bool) {
	if len(drift) == 0 {
		return
	}
	counts := map[string]int{}
	for _, ep := range c.Create {
		if drift[ep.Pod] {
			counts[RepairDeleted]++
		}
	}
	for _, u := range c.Update {
		if drift[u.New.Pod] {
			counts[RepairRewritten]++
		}
	}
	for _, rec := range c.Delete {
		if drift[rec.Pod] {
			counts[RepairExtra]++
		}
	}
	if len(counts) == 0 {
		return
	}
	for kind, n := range counts {
		metrics.StoreRepairs.WithLabelValues(storeName, kind).Add(float64(n))
	}
	y.recorder.Eventf(reg, nil, corev1.EventTypeWarning, v1beta1.EventStoreRepaired, "Repair",
		"store %s: repaired endpoints of service %s changed outside registrar: %d missing rewritten, %d altered restored, %d unexpected removed",
		storeName, target.Service, counts[RepairDeleted], counts[RepairRewritten], counts[RepairExtra])
}
