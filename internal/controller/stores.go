package controller

import (
	"strings"
	"time"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/multi"
)

// storeStates is implemented by a Store that publishes to several named stores
// (internal/store/multi): it reports each of them for status.stores.
type storeStates interface {
	States(scope store.Scope, owner string) []multi.State
}

// maxStoreMessage bounds status.stores[].message.
const maxStoreMessage = 512

// storesOf is the registry's spec.stores as Scope.Stores.
func storesOf(reg *v1alpha1.ServiceRegistry) string { return strings.Join(reg.Spec.Stores, ",") }

// dnsTTL is the registry's spec.dns.ttlSeconds; zero (the store's default) when unset.
func dnsTTL(reg *v1alpha1.ServiceRegistry) time.Duration {
	if reg.Spec.DNS == nil || reg.Spec.DNS.TTLSeconds == nil {
		return 0
	}
	return time.Duration(*reg.Spec.DNS.TTLSeconds) * time.Second
}

// storeStatuses reports each store of the registry; nil when the Store is a single backend.
func (r *ServiceRegistryReconciler) storeStatuses(s *reconcileScope) []v1alpha1.StoreStatus {
	st, ok := r.Store.(storeStates)
	if !ok {
		return nil
	}
	var out []v1alpha1.StoreStatus
	for _, state := range st.States(s.target, string(s.reg.UID)) {
		ss := v1alpha1.StoreStatus{Name: state.Name, Registered: int32(state.Registered), Synced: state.Err == nil}
		if state.Err != nil {
			ss.Message = state.Err.Error()
			if len(ss.Message) > maxStoreMessage {
				ss.Message = ss.Message[:maxStoreMessage]
			}
		}
		out = append(out, ss)
	}
	return out
}
