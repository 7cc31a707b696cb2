// Package leaseguard decides when registrar holds the deregistrations that node Lease lapses
// would cause, because so many lapse at once that the likelier cause is the operator's own
// blindness (cut off from the API server, its Lease watch stalled) than the death of every
// node. It is modelled on the node lifecycle controller of kube-controller-manager:
//
//   - --unhealthy-zone-threshold (0.55): a zone with more than this share of its nodes not
//     ready (and more than two of them) is "partially disrupted"; here a scope (one
//     ServiceRegistry, or every endpoint of the cluster) with more than Share of its endpoints
//     on lapsed nodes, spread over at least MinNodes lapsed nodes, is disrupted, and the
//     removals that the lapses would cause are held;
//   - every zone fully disrupted stops all evictions (the master is assumed partitioned);
//     here every node carrying endpoints lapsed: every removal is held;
//   - --large-cluster-size-threshold (50) and --secondary-node-eviction-rate (0.01/s): in a
//     large cluster a partial disruption still evicts, slowly; here, in a cluster with more
//     than LargeClusterSize nodes carrying endpoints, the held removals of a partial
//     disruption are released one lapsed node at a time at SecondaryRate nodes per second.
//
// Removals a pod's own status causes (not ready, terminating, deleted) never reach this
// package: they are never held. Everything here is pure: time is passed in.
package leaseguard

import (
	"fmt"
	"iter"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

// LookAhead: for the counts, a node whose Lease is due to lapse within this share of its
// bound (the Lease's duration, capped by --node-lease-timeout) counts as lapsed already. A
// blind operator sees the Leases lapse one by one over a kubelet renew interval (10 s), in
// the order they were last renewed: without looking ahead, the first nodes to lapse would
// be deregistered before the share of lapsed ones crossed the threshold. With the defaults
// (a 40 s Lease capped at 20 s, renewed every 10 s) a node counts once it has not been seen
// renewing for 12 s: a healthy node renews within 10 s, and when the first Lease lapses
// under blindness every node renewed more than 8 s before it is counted (about 80 %).
const LookAhead = 0.4

// Lapsing reports whether, for the counts, a node with Lease l counts as lapsed at now:
// lapsed, or due to lapse within LookAhead of its bound (see eligibility.LeaseExpiry for
// maxAge). A Lease that never lapses (no renewal, no duration) never counts.
func Lapsing(l eligibility.NodeLease, maxAge time.Duration, now time.Time) bool {
	expiry, ok := eligibility.LeaseExpiry(l, maxAge)
	if !ok {
		return false
	}
	renewed := l.RenewTime
	if !l.ObservedAt.IsZero() {
		renewed = l.ObservedAt
	}
	ahead := time.Duration(LookAhead * float64(expiry.Sub(renewed)))
	return !now.Before(expiry.Add(-ahead))
}

// Defaults of the operator's flags, the node lifecycle controller's values.
const (
	DefaultShare            = 0.55
	DefaultMinNodes         = 3
	DefaultLargeClusterSize = 50
	DefaultSecondaryRate    = 0.01
)

// Config tunes the guard.
type Config struct {
	// Share: when more than this share of a scope's endpoints sit on lapsed nodes, their
	// removals are held. 1 (or more) disables the guard.
	Share float64
	// MinNodes: a scope is held only when its lapsed endpoints sit on at least this many
	// lapsed nodes: one or two nodes do die.
	MinNodes int
	// LargeClusterSize: in a cluster with more nodes (carrying endpoints) than this, a
	// partial disruption releases its held removals at SecondaryRate.
	LargeClusterSize int
	// SecondaryRate is how many lapsed nodes per second have their removals released during a
	// partial disruption of a large cluster; 0 releases none.
	SecondaryRate float64
}

// DefaultConfig is the node lifecycle controller's thresholds.
func DefaultConfig() Config {
	return Config{Share: DefaultShare, MinNodes: DefaultMinNodes, LargeClusterSize: DefaultLargeClusterSize, SecondaryRate: DefaultSecondaryRate}
}

// Enabled reports whether the guard can ever hold anything: a share of 1 or more (or the
// zero Config) never holds.
func (c Config) Enabled() bool { return c.Share > 0 && c.Share < 1 }

// Validate rejects settings that make no sense.
func (c Config) Validate() error {
	switch {
	case c.Share <= 0:
		return fmt.Errorf("node Lease guard share %v: must be more than 0 (1 disables the guard)", c.Share)
	case c.MinNodes < 1:
		return fmt.Errorf("node Lease guard min nodes %d: must be at least 1", c.MinNodes)
	case c.LargeClusterSize < 0:
		return fmt.Errorf("node Lease guard large cluster size %d: must not be negative", c.LargeClusterSize)
	case c.SecondaryRate < 0:
		return fmt.Errorf("node Lease guard secondary rate %v: must not be negative", c.SecondaryRate)
	}
	return nil
}

// Counts describe one scope: the endpoints that pass every rule but the node Lease one (the
// endpoints the scope would have if every node were alive), and the nodes they sit on; a
// node counts as lapsed when Lapsing says so.
type Counts struct {
	Endpoints, Lapsed  int // endpoints, and those on a lapsed node
	Nodes, LapsedNodes int // nodes carrying them, and those whose Lease lapsed
}

// Share is the share of the endpoints on lapsed nodes.
func (c Counts) Share() float64 {
	if c.Endpoints == 0 {
		return 0
	}
	return float64(c.Lapsed) / float64(c.Endpoints)
}

// State is how disrupted a scope is.
type State int

const (
	// Normal: removals proceed.
	Normal State = iota
	// Partial: more than Share of the endpoints on lapsed nodes, not every node lapsed.
	Partial
	// Full: every node carrying endpoints lapsed (and at least MinNodes of them).
	Full
)

func (s State) String() string {
	return [...]string{"Normal", "Partial", "Full"}[s]
}

// Assess classifies one scope.
func (c Config) Assess(n Counts) State {
	if !c.Enabled() || n.Lapsed == 0 || n.LapsedNodes < c.MinNodes || n.Share() <= c.Share {
		return Normal
	}
	if n.LapsedNodes >= n.Nodes {
		return Full
	}
	return Partial
}

// Scope names what a hold is about.
type Scope string

const (
	ScopeCluster  Scope = "cluster"
	ScopeRegistry Scope = "registry"
)

// Decision says whether a registry's node-Lease removals are held.
type Decision struct {
	Hold bool
	// Scope is the disrupted scope (the cluster's when both are).
	Scope Scope
	// State is the disrupted scope's state.
	State State
	// Counts are the disrupted scope's counts.
	Counts Counts
	// Trickle: the held removals are released one lapsed node at a time at SecondaryRate
	// (a partial disruption of a large cluster).
	Trickle bool
}

// Decide says whether the removals that node Lease lapses would cause in a registry are
// held, given the registry's counts and the cluster's.
func (c Config) Decide(registry, cluster Counts) Decision {
	cs, rs := c.Assess(cluster), c.Assess(registry)
	var d Decision
	switch {
	case cs != Normal:
		d = Decision{Hold: true, Scope: ScopeCluster, State: cs, Counts: cluster}
	case rs != Normal:
		d = Decision{Hold: true, Scope: ScopeRegistry, State: rs, Counts: registry}
	default:
		return Decision{Counts: registry}
	}
	d.Trickle = cs != Full && cluster.Nodes > c.LargeClusterSize && c.SecondaryRate > 0
	return d
}

// Message is the condition's message for a hold: what is held, why, and what to do.
func (d Decision) Message(held int) string {
	scope := "this registry's"
	if d.Scope == ScopeCluster {
		scope = "the cluster's"
	}
	msg := fmt.Sprintf("%d endpoint(s) kept in the store: %d of %s %d endpoints (%.0f%%) sit on %d of %d nodes whose Lease lapsed at once, "+
		"likelier the operator being cut off from the API server than that many nodes dying; removals resume when the Leases are renewed or the share falls. "+
		"Check the operator's connection to the API server and `kubectl get leases -n kube-node-lease`",
		held, d.Counts.Lapsed, scope, d.Counts.Endpoints, 100*d.Counts.Share(), d.Counts.LapsedNodes, d.Counts.Nodes)
	if d.Trickle {
		msg += "; in this large cluster the lapsed nodes' removals are released slowly (--node-lease-guard-secondary-rate)"
	}
	return msg
}

// Releaser releases the held removals of a partial disruption in a large cluster, one
// lapsed node at a time at a steady rate (a token bucket of burst 1, like the node lifecycle
// controller's eviction queue). A released node stays released until its Lease is renewed or
// deleted, or its Node deleted (Forget): the set holds only nodes that still exist and stay
// lapsed. Safe for concurrent use.
type Releaser struct {
	mu       sync.Mutex
	tokens   float64
	last     time.Time
	released map[string]bool
}

// NewReleaser returns a releaser whose first release is immediate.
func NewReleaser() *Releaser {
	return &Releaser{tokens: 1, released: map[string]bool{}}
}

// Released reports whether node's held removals are released at now, at rate nodes per
// second: a node released before stays released, another one is released when a token is
// available.
func (r *Releaser) Released(node string, rate float64, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released[node] {
		return true
	}
	if !r.last.IsZero() && now.After(r.last) {
		r.tokens = min(1, r.tokens+now.Sub(r.last).Seconds()*rate)
	}
	if r.last.IsZero() || now.After(r.last) {
		r.last = now
	}
	if rate <= 0 || r.tokens < 1 {
		return false
	}
	r.tokens--
	r.released[node] = true
	return true
}

// Forget drops a node's release: its Lease was renewed or deleted, or its Node deleted.
func (r *Releaser) Forget(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.released, node)
}

// ReleasedNodes lists the released nodes, sorted.
func (r *Releaser) ReleasedNodes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.released))
	for n := range r.released {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Placement is how many endpoints (passing every rule but the node Lease one) a registry
// has on each node; the empty node name counts endpoints of pods without a node.
type Placement map[string]int

// PlacementOf is a registry's placement from its pods and their verdicts, with the nodes whose
// Lease lapsed: a pod counts when it passes every rule but the node Lease one (registered or
// warming up) or the node Lease rule took it out (NodeLeaseExpired: its node is lapsed). Pods
// of a node gone says the API server deleted (its Node or Lease) count nowhere: a deletion is
// no sign of blindness.
func PlacementOf(pods iter.Seq2[*corev1.Pod, eligibility.Verdict], gone func(node string) bool) (Placement, map[string]bool) {
	placement := Placement{}
	lapsed := map[string]bool{}
	for pod, v := range pods {
		if gone(pod.Spec.NodeName) {
			continue
		}
		switch {
		case v.Reason == v1beta1.ReasonNodeLeaseExpired:
			placement[pod.Spec.NodeName]++
			lapsed[pod.Spec.NodeName] = true
		case v.Eligible() || v.State == v1beta1.EndpointWarmingUp:
			placement[pod.Spec.NodeName]++
		}
	}
	return placement, lapsed
}

// Cluster keeps every registry's last placement, to count the cluster's endpoints per node.
// Registries are keyed by any comparable name. Safe for concurrent use.
type Cluster[K comparable] struct {
	mu     sync.Mutex
	byReg  map[K]Placement
	byNode map[string]int
}

// NewCluster returns an empty cluster view.
func NewCluster[K comparable]() *Cluster[K] {
	return &Cluster[K]{byReg: map[K]Placement{}, byNode: map[string]int{}}
}

// Set records a registry's placement, replacing its previous one; nil forgets the registry.
func (c *Cluster[K]) Set(reg K, p Placement) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for node, n := range c.byReg[reg] {
		if c.byNode[node] -= n; c.byNode[node] <= 0 {
			delete(c.byNode, node)
		}
	}
	delete(c.byReg, reg)
	if len(p) == 0 {
		return
	}
	cp := make(Placement, len(p))
	for node, n := range p {
		if n > 0 {
			cp[node] = n
			c.byNode[node] += n
		}
	}
	c.byReg[reg] = cp
}

// Count counts the cluster's endpoints and nodes, a node counting as lapsed when lapsed says
// so (asked once per node, at the time of the call: placements may be older than the Lease
// states, which are always current).
func (c *Cluster[K]) Count(lapsed func(node string) bool) Counts {
	c.mu.Lock()
	nodes := make(map[string]int, len(c.byNode))
	for node, n := range c.byNode {
		nodes[node] = n
	}
	c.mu.Unlock()
	return countPlacement(nodes, lapsed)
}

// Count counts one placement.
func (p Placement) Count(lapsed func(node string) bool) Counts {
	return countPlacement(p, lapsed)
}

func countPlacement(p map[string]int, lapsed func(node string) bool) Counts {
	var n Counts
	for node, eps := range p {
		if eps <= 0 {
			continue
		}
		if node == "" { // not scheduled (or not known): counts, never lapses, is no node
			n.Endpoints += eps
			continue
		}
		n.Nodes++
		n.Endpoints += eps
		if lapsed(node) {
			n.LapsedNodes++
			n.Lapsed += eps
		}
	}
	return n
}
