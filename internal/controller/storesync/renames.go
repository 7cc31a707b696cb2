package storesync

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
)

// ownerIndex finds a registry's records under other service names of its namespace from the
// stores themselves (every value carries its owner, the registry's UID), so that a rename
// whose status write was lost in a crash orphans nothing. Each store that can list all its
// records (store.Scanner: etcd) is read once per operator start; a registry is looked up in
// it until its first successful retirement, after which renames are tracked in memory
// (status.serviceName and the scopes the reconciler knows).
type ownerIndex struct {
	mu sync.Mutex
	// scopes maps store name → owner → the scopes holding its records, once read.
	scopes map[string]map[string]map[store.Scope]bool
	// failedAt is when reading a store last failed: not retried within ownerScanRetry.
	failedAt map[string]time.Time
	// done are the registries whose records under other names were removed since start: by
	// name, the UID of the registry of that name that was done (a registry created again
	// under the name is not).
	done map[types.NamespacedName]types.UID
	// retry are old service names whose removal failed, per registry.
	retry map[types.NamespacedName]retryNames
}

// retryNames are a registry's old service names whose removal failed.
type retryNames struct {
	uid   types.UID
	names map[string]bool
}

// Bounded: done and retry hold only registries that exist (forget drops a deleted one), and
// scopes, read once per store, loses each registry's entry once it is done or deleted; what
// remains of it are the owners no registry claims since start (records the operator left while
// it was not running).

// forget drops everything the index holds of a registry that is gone.
func (ix *ownerIndex) forget(name types.NamespacedName) {
	if ix == nil {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, uid := range []types.UID{ix.done[name], ix.retry[name].uid} {
		if uid != "" {
			ix.dropScanned(uid)
		}
	}
	delete(ix.done, name)
	delete(ix.retry, name)
}

// dropScanned drops an owner from what was read of the stores (ix.mu held).
func (ix *ownerIndex) dropScanned(uid types.UID) {
	for _, byOwner := range ix.scopes {
		delete(byOwner, string(uid))
	}
}

// ownerScanRetry spaces the attempts to read a store that failed.
const ownerScanRetry = 5 * time.Second

func newOwnerIndex() *ownerIndex {
	return &ownerIndex{
		scopes: map[string]map[string]map[store.Scope]bool{}, failedAt: map[string]time.Time{},
		done: map[types.NamespacedName]types.UID{}, retry: map[types.NamespacedName]retryNames{},
	}
}

// fromStores returns the services of namespace ns that hold records of owner in any store
// that can be searched; complete is false when a store could not be read.
func (y *Syncer) fromStores(ctx context.Context, owner types.UID, ns string) (services []string, complete bool) {
	ix := y.owners
	ix.mu.Lock()
	defer ix.mu.Unlock()
	found := map[string]bool{}
	complete = true
	for _, t := range y.allStores() {
		sc, ok := t.Store.(store.Scanner)
		if !ok {
			continue
		}
		byOwner, read := ix.scopes[t.Name]
		if !read {
			if time.Since(ix.failedAt[t.Name]) < ownerScanRetry {
				complete = false
				continue
			}
			records, err := sc.ListAll(ctx)
			if errors.Is(err, errors.ErrUnsupported) {
				continue
			}
			if err != nil {
				log.FromContext(ctx).Info("cannot search the store for records under earlier service names", "store", t.Name, "error", err.Error())
				ix.failedAt[t.Name] = time.Now()
				complete = false
				continue
			}
			byOwner = map[string]map[store.Scope]bool{}
			for _, rec := range records {
				if rec.Owner == "" {
					continue
				}
				if byOwner[rec.Owner] == nil {
					byOwner[rec.Owner] = map[store.Scope]bool{}
				}
				byOwner[rec.Owner][store.Scope{Service: rec.Service, Namespace: rec.Namespace}] = true
			}
			ix.scopes[t.Name] = byOwner
		}
		for sc := range byOwner[string(owner)] {
			if sc.Namespace == ns {
				found[sc.Service] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(found)), complete
}

// OldServices are the service names other than current that may hold records of reg:
// status.serviceName, the scopes known in memory, names whose removal failed before, and,
// until the registry's first successful retirement since start, the stores' own records.
// complete is false when a store could not be searched.
func (y *Syncer) OldServices(ctx context.Context, reg *v1beta1.ServiceRegistry, current string) (olds []string, complete bool) {
	set := map[string]bool{}
	if reg.Status.ServiceName != "" {
		set[reg.Status.ServiceName] = true
	}
	for _, svc := range y.known.services(client.ObjectKeyFromObject(reg)) {
		set[svc] = true
	}
	name := client.ObjectKeyFromObject(reg)
	y.owners.mu.Lock()
	if rt := y.owners.retry[name]; rt.uid == reg.UID {
		maps.Copy(set, rt.names)
	}
	done := y.owners.done[name] == reg.UID
	y.owners.mu.Unlock()
	complete = true
	if !done {
		var found []string
		found, complete = y.fromStores(ctx, reg.UID, reg.Namespace)
		for _, svc := range found {
			set[svc] = true
		}
	}
	delete(set, current)
	return slices.Sorted(maps.Keys(set)), complete
}

// RetireOld removes the registry's records under every service name it used before
// (see OldServices) other than target's, after spec.serviceName changed, even when the
// status write that recorded the old name was lost.
func (y *Syncer) RetireOld(ctx context.Context, reg *v1beta1.ServiceRegistry, target store.Scope) error {
	olds, complete := y.OldServices(ctx, reg, target.Service)
	failed := map[string]bool{}
	var errs []error
	for _, old := range olds {
		if err := y.RemoveOwned(ctx, reg, store.Scope{Service: old, Namespace: reg.Namespace}); err != nil {
			failed[old] = true
			errs = append(errs, err)
		}
	}
	name := client.ObjectKeyFromObject(reg)
	y.owners.mu.Lock()
	defer y.owners.mu.Unlock()
	if len(failed) > 0 {
		y.owners.retry[name] = retryNames{uid: reg.UID, names: failed}
	} else {
		delete(y.owners.retry, name)
	}
	if complete && len(failed) == 0 {
		if old := y.owners.done[name]; old != "" && old != reg.UID {
			y.owners.dropScanned(old) // a registry of that name deleted before, its deletion unseen
		}
		y.owners.done[name] = reg.UID
		y.owners.dropScanned(reg.UID) // never looked up again
	}
	return errors.Join(errs...)
}

// OwnersHeld counts the registries among uids that the owner index still holds anything of
// (its bound: a deleted or retired registry leaves nothing behind).
func (y *Syncer) OwnersHeld(uids ...types.UID) int {
	ix := y.owners
	ix.mu.Lock()
	defer ix.mu.Unlock()
	held := map[types.UID]bool{}
	for _, uid := range ix.done {
		held[uid] = true
	}
	for _, rt := range ix.retry {
		held[rt.uid] = true
	}
	for _, byOwner := range ix.scopes {
		for owner := range byOwner {
			held[types.UID(owner)] = true
		}
	}
	n := 0
	for _, uid := range uids {
		if held[uid] {
			n++
		}
	}
	return n
}
