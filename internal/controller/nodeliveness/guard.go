package nodeliveness

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/leaseguard"
)

// guardState is what the node Lease guard keeps across reconciles: every registry's placement
// of endpoints on nodes (the cluster's counts) and the nodes released at the secondary rate.
type guardState struct {
	cluster  *leaseguard.Cluster[types.NamespacedName]
	releaser *leaseguard.Releaser
}

// guard returns the guard's state, created on first use.
func (t *Tracker) guard() *guardState {
	t.guardOnce.Do(func() {
		t.guardState = &guardState{cluster: leaseguard.NewCluster[types.NamespacedName](), releaser: leaseguard.NewReleaser()}
	})
	return t.guardState
}

// GuardEnabled reports whether the guard may hold deregistrations at all.
func (t *Tracker) GuardEnabled() bool { return t.guardConfig.Enabled() }

// Place records a registry's placement of endpoints on nodes, for the cluster's counts; a nil
// placement drops the registry (it is gone).
func (t *Tracker) Place(name types.NamespacedName, placement leaseguard.Placement) {
	t.guard().cluster.Set(name, placement)
}

// DecideHold asks the guard whether to hold the node Lease deregistrations of a registry
// placed as placement: its endpoints and the cluster's on lapsed nodes (or nodes about to
// lapse: leaseguard.Lapsing) are counted, lapsed holding the registry's own verdicts (a node
// true when its pods' verdict was NodeLeaseExpired) and any other node read once. A node the
// API server deleted is no sign of blindness: it never pushes towards a hold.
func (t *Tracker) DecideHold(ctx context.Context, placement leaseguard.Placement, lapsed map[string]bool, now time.Time) leaseguard.Decision {
	lapsing := func(node string) bool {
		if _, known := lapsed[node]; !known {
			l, ok := t.Lease(ctx, node)
			lapsed[node] = ok && !l.Gone() && leaseguard.Lapsing(l, t.timeout, now)
		}
		return lapsed[node]
	}
	return t.guardConfig.Decide(placement.Count(lapsing), t.guard().cluster.Count(lapsing))
}

// Released reports whether the node's pods may leave during a hold that trickles: the node
// was released at the guard's secondary rate by now.
func (t *Tracker) Released(node string, now time.Time) bool {
	return t.guard().releaser.Released(node, t.guardConfig.SecondaryRate, now)
}
