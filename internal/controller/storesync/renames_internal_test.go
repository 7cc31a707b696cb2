package storesync

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/store"
)

// The owner index forgets a deleted registry entirely: its name, its UID, its scanned scopes.
func TestOwnerIndexForget(t *testing.T) {
	ix := newOwnerIndex()
	web, api := types.NamespacedName{Namespace: "ns", Name: "web"}, types.NamespacedName{Namespace: "ns", Name: "api"}
	ix.scopes["etcd"] = map[string]map[store.Scope]bool{
		"uid-web":  {{Service: "old-web", Namespace: "ns"}: true},
		"uid-api":  {{Service: "old-api", Namespace: "ns"}: true},
		"uid-gone": {{Service: "left", Namespace: "ns"}: true}, // no registry claims it
	}
	ix.done[web] = "uid-web"
	ix.retry[api] = retryNames{uid: "uid-api", names: map[string]bool{"old-api": true}}
	ix.forget(web)
	ix.forget(api)
	ix.forget(types.NamespacedName{Namespace: "ns", Name: "never-seen"})
	if len(ix.done) != 0 || len(ix.retry) != 0 {
		t.Errorf("done %v, retry %v after both registries were forgotten, want none", ix.done, ix.retry)
	}
	if got := ix.scopes["etcd"]; len(got) != 1 || got["uid-gone"] == nil {
		t.Errorf("scanned owners %v, want only the one no registry claims", got)
	}
	var none *ownerIndex
	none.forget(web)
}
