package controller

import (
	"strings"
	"time"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// maxStoreMessage bounds status.stores[].message.
const maxStoreMessage = 512

// storesOf is the registry's spec.stores as Scope.Stores.
func storesOf(reg *v1beta1.ServiceRegistry) string { return strings.Join(reg.Spec.Stores, ",") }

// dnsTTL is the registry's spec.dns.ttlSeconds; zero (the store's default) when unset.
func dnsTTL(reg *v1beta1.ServiceRegistry) time.Duration {
	if reg.Spec.DNS == nil || reg.Spec.DNS.TTLSeconds == 0 {
		return 0
	}
	return time.Duration(reg.Spec.DNS.TTLSeconds) * time.Second
}

// storeStatuses reports each store of the registry as this reconcile left it; nil with a
// single Store, and the previous report when this reconcile did not reach the stores.
func (r *ServiceRegistryReconciler) storeStatuses(s *reconcileScope) []v1beta1.StoreStatus {
	if r.Stores == nil {
		return nil
	}
	if s.stores == nil {
		return s.originalStatus.Stores
	}
	owner := string(s.reg.UID)
	out := make([]v1beta1.StoreStatus, 0, len(s.stores))
	for _, res := range s.stores {
		ss := v1beta1.StoreStatus{Name: res.Name, Synced: res.Err == nil}
		for _, rec := range res.Records {
			if rec.Owner == owner {
				ss.Registered++
			}
		}
		if res.Err != nil {
			ss.Message = res.Err.Error()
			if len(ss.Message) > maxStoreMessage {
				ss.Message = ss.Message[:maxStoreMessage]
			}
		}
		out = append(out, ss)
	}
	return out
}
