package controller

import "k8s.io/apimachinery/pkg/types"

// OwnerIndexHolds counts the registries among uids that the owner index (renames.go) still
// holds anything of.
func (r *ServiceRegistryReconciler) OwnerIndexHolds(uids ...types.UID) int {
	ix := r.owners
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
