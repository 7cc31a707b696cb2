package storesync

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// maxStoreMessage bounds status.stores[].message.
const maxStoreMessage = 512

// Statuses is status.stores: each store of the registry (owner is its UID) as a sync left it,
// and previous, the last report, when the reconcile did not reach the stores (results nil).
func Statuses(results []StoreResult, owner types.UID, previous []v1beta1.StoreStatus) []v1beta1.StoreStatus {
	if results == nil {
		return previous
	}
	out := make([]v1beta1.StoreStatus, 0, len(results))
	for _, res := range results {
		ss := v1beta1.StoreStatus{Name: res.Name, Synced: res.Err == nil}
		for _, rec := range res.Records {
			if rec.Owner == string(owner) {
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
