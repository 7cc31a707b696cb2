package controller

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

	"github.com/registrar-dev/registrar/api/v1alpha1"
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
	// done are the registries whose records under other names were removed since start.
	done map[types.UID]bool
	// retry are old service names whose removal failed, per registry.
	retry map[types.UID]map[string]bool
}

// ownerScanRetry spaces the attempts to read a store that failed.
const ownerScanRetry = 5 * time.Second

func newOwnerIndex() *ownerIndex {
	return &ownerIndex{
		scopes: map[string]map[string]map[store.Scope]bool{}, failedAt: map[string]time.Time{},
		done: map[types.UID]bool{}, retry: map[types.UID]map[string]bool{},
	}
}

// fromStores returns the services of namespace ns that hold records of owner in any store
// that can be searched; complete is false when a store could not be read.
func (r *ServiceRegistryReconciler) fromStores(ctx context.Context, owner types.UID, ns string) (services []string, complete bool) {
	ix := r.owners
	ix.mu.Lock()
	defer ix.mu.Unlock()
	found := map[string]bool{}
	complete = true
	for _, t := range r.allStores() {
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

// oldServices are the service names other than current that may hold records of reg:
// status.serviceName, the scopes known in memory, names whose removal failed before, and,
// until the registry's first successful retirement since start, the stores' own records.
// complete is false when a store could not be searched.
func (r *ServiceRegistryReconciler) oldServices(ctx context.Context, reg *v1alpha1.ServiceRegistry, current string) (olds []string, complete bool) {
	set := map[string]bool{}
	if reg.Status.ServiceName != "" {
		set[reg.Status.ServiceName] = true
	}
	for _, svc := range r.known.services(client.ObjectKeyFromObject(reg)) {
		set[svc] = true
	}
	r.owners.mu.Lock()
	maps.Copy(set, r.owners.retry[reg.UID])
	done := r.owners.done[reg.UID]
	r.owners.mu.Unlock()
	complete = true
	if !done {
		var found []string
		found, complete = r.fromStores(ctx, reg.UID, reg.Namespace)
		for _, svc := range found {
			set[svc] = true
		}
	}
	delete(set, current)
	return slices.Sorted(maps.Keys(set)), complete
}

// retireOldScope removes the registry's records under every service name it used before
// (see oldServices), after spec.serviceName changed, even when the status write that
// recorded the old name was lost.
func (r *ServiceRegistryReconciler) retireOldScope(ctx context.Context, s *reconcileScope) error {
	olds, complete := r.oldServices(ctx, s.reg, s.target.Service)
	failed := map[string]bool{}
	var errs []error
	for _, old := range olds {
		if err := r.removeOwned(ctx, s.reg, store.Scope{Service: old, Namespace: s.reg.Namespace, Stores: storesOf(s.reg)}); err != nil {
			failed[old] = true
			errs = append(errs, err)
		}
	}
	r.owners.mu.Lock()
	defer r.owners.mu.Unlock()
	if len(failed) > 0 {
		r.owners.retry[s.reg.UID] = failed
	} else {
		delete(r.owners.retry, s.reg.UID)
	}
	if complete && len(failed) == 0 {
		r.owners.done[s.reg.UID] = true
	}
	return errors.Join(errs...)
}
