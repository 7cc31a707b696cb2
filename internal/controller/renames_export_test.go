package controller

import "k8s.io/apimachinery/pkg/types"

// OwnerIndexHolds counts the registries among uids that the owner index (renames.go) still
// holds anything of.
func (r *ServiceRegistryReconciler) OwnerIndexHolds(uids ...types.UID) int {
	ix := r.owners
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := 0
	for _, uid := range uids {
		held := ix.done[uid] || ix.retry[uid] != nil
		for _, byOwner := range ix.scopes {
			if byOwner[string(uid)] != nil {
				held = true
			}
		}
		if held {
			n++
		}
	}
	return n
}
