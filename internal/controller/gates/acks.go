package gates

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/store"
)

// Acks remembers, per ServiceRegistry (by UID), the pod UIDs whose endpoints its store
// acknowledged at its last reconcile. A gate selected by several registries turns True
// only once every one of them holds the endpoint (see eligibility.GateWaitsFor); each
// registry's reconcile publishes its acknowledgements here before it flips gates, and reads
// the others', so whichever registry stores the endpoint last flips the gate.
type Acks struct {
	mu sync.Mutex
	// acks holds each registry's own records by pod name, as its reconcile computed them
	// (never modified afterwards: shared, not copied).
	acks map[types.UID]map[string]store.Record
}

// NewAcks returns an empty record of acknowledgements.
func NewAcks() *Acks { return &Acks{acks: map[types.UID]map[string]store.Record{}} }

// Set records the registry's stored records (its reconcile's stored records, which nothing
// modifies afterwards); nil (store unread) forgets them.
func (g *Acks) Set(registry types.UID, stored map[string]store.Record) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if stored == nil {
		delete(g.acks, registry)
		return
	}
	g.acks[registry] = stored
}

// Has reports whether the registry's last reconcile stored the pod (of this UID).
func (g *Acks) Has(registry types.UID, pod string, podUID types.UID) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	rec, ok := g.acks[registry][pod]
	return ok && rec.UID == string(podUID)
}

// Forget drops a registry's acknowledgements (gone, or its store unknown).
func (g *Acks) Forget(registry types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.acks, registry)
}
