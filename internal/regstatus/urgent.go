package regstatus

import (
	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Urgent reports whether a new status must reach the API server at once rather than within
// the status writer's pacing interval: it answers a new generation (observedGeneration), or
// a condition appeared, went, or changed its status or reason. Everything else — counts,
// status.endpoints, messages, drain advice, store details — only refines what the
// conditions already say, and a busy registry's writes of it are paced.
func Urgent(old, cur v1beta1.ServiceRegistryStatus) bool {
	if old.ObservedGeneration != cur.ObservedGeneration || len(old.Conditions) != len(cur.Conditions) {
		return true
	}
	for _, c := range cur.Conditions {
		found := false
		for _, o := range old.Conditions {
			if o.Type == c.Type {
				found = true
				if o.Status != c.Status || o.Reason != c.Reason {
					return true
				}
				break
			}
		}
		if !found {
			return true
		}
	}
	return false
}
