package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/store"
)

// gateAcks remembers, per ServiceRegistry (by UID), the pod UIDs whose endpoints its store
// acknowledged at its last reconcile. A gate selected by several registries turns True
// only once every one of them holds the endpoint (see eligibility.GateWaitsFor); each
// registry's reconcile publishes its acknowledgements here before it flips gates, and reads
// the others', so whichever registry stores the endpoint last flips the gate.
type gateAcks struct {
	mu   sync.Mutex
	acks map[types.UID]map[string]bool
}

func newGateAcks() *gateAcks { return &gateAcks{acks: map[types.UID]map[string]bool{}} }

// set records the registry's stored records; nil (store unread) forgets them.
func (g *gateAcks) set(registry types.UID, stored map[string]store.Record) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if stored == nil {
		delete(g.acks, registry)
		return
	}
	uids := make(map[string]bool, len(stored))
	for _, rec := range stored {
		uids[rec.UID] = true
	}
	g.acks[registry] = uids
}

func (g *gateAcks) has(registry types.UID, podUID types.UID) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.acks[registry][string(podUID)]
}

func (g *gateAcks) forget(registry types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.acks, registry)
}
