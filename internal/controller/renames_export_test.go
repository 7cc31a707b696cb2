package controller

import "k8s.io/apimachinery/pkg/types"

// OwnerIndexHolds counts the registries among uids that the owner index (storesync) still
// holds anything of.
func (r *ServiceRegistryReconciler) OwnerIndexHolds(uids ...types.UID) int {
	return r.syncer.OwnersHeld(uids...)
}
