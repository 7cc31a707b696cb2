package nodeliveness

import (
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/internal/eligibility"
)

// leaseMemo holds what the verdict reads of each node Lease (nodeLease), as the Lease watch
// last delivered it: the watch's predicate records every Lease event (leaseRenewedAfterLapse)
// before any handler enqueues for it, and the reconciler's workers start only once every
// Lease listed at start went through it. Reading it costs a map lookup, where a cache Get of
// a Lease (a namespace-restricted cache) looked up a REST mapping and allocated each time:
// 7 % of the operator's allocations at 5,000 pods (docs/performance.md).
//
// It also remembers what the API server said of nodes that are gone, as tombstones: the last
// state of a deleted Lease (Deleted), and the Nodes seen deleted (NodeDeleted). Without them
// a node whose Lease lapsed and was then deleted (with its Node) looked like a node never
// seen, and its dead pods were registered again until the pod garbage collector deleted
// them. Bounded: a tombstone is kept only for a node that still has pods in the cache when it
// is deleted, and dropped when its last pod is deleted or the Lease (or Node) is created
// again; so the tombstones never outnumber the nodes the cached pods name.
type leaseMemo struct {
	mu sync.RWMutex
	m  map[string]eligibility.NodeLease
	// nodesGone are the Nodes seen deleted that still have pods.
	nodesGone map[string]bool
}

func newLeaseMemo() *leaseMemo {
	return &leaseMemo{m: map[string]eligibility.NodeLease{}, nodesGone: map[string]bool{}}
}

// get returns what is known of the node: its Lease (or the last state of its deleted Lease),
// and whether the Node was seen deleted; false when nothing is.
func (m *leaseMemo) get(node string) (eligibility.NodeLease, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.m[node]
	if m.nodesGone[node] {
		l.NodeDeleted, ok = true, true
	}
	return l, ok
}

// record notes a node Lease event's object (a Lease of another namespace is ignored); a Lease
// created again replaces the tombstone of the deleted one.
func (m *leaseMemo) record(obj client.Object) {
	l, ok := obj.(*coordinationv1.Lease)
	if m == nil || !ok || l.Namespace != LeaseNamespace {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[l.Name] = nodeLease(l)
}

// leaseDeleted notes that the node's Lease was deleted: last (its last state, with when its
// renewal was seen) is kept as a tombstone when keep (the node still has pods), else the
// node's Lease is forgotten.
func (m *leaseMemo) leaseDeleted(node string, last eligibility.NodeLease, keep bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !keep {
		delete(m.m, node)
		return
	}
	last.Deleted, last.NodeDeleted = true, false
	m.m[node] = last
}

// nodeDeleted notes that the Node was deleted; kept only when it still has pods (keep).
func (m *leaseMemo) nodeDeleted(node string, keep bool) {
	if m == nil || !keep {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodesGone[node] = true
}

// nodeCreated notes that a Node of that name exists (again): it is no longer gone. It
// reports whether it was.
func (m *leaseMemo) nodeCreated(node string) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	gone := m.nodesGone[node]
	delete(m.nodesGone, node)
	return gone
}

// tombstoned reports whether the memo keeps a tombstone of the node (its Node or its Lease
// deleted).
func (m *leaseMemo) tombstoned(node string) bool {
	if m == nil {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.nodesGone[node] || m.m[node].Deleted
}

// dropTombstones forgets the node's tombstones: its last pod is gone.
func (m *leaseMemo) dropTombstones(node string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.nodesGone, node)
	if m.m[node].Deleted {
		delete(m.m, node)
	}
}

// size is how many nodes the memo holds anything of (tests).
func (m *leaseMemo) size() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := len(m.m)
	for node := range m.nodesGone {
		if _, ok := m.m[node]; !ok {
			n++
		}
	}
	return n
}

// RenewalMargin: a renewal seen within this margin before the node's Lease lapses counts as
// a renewal after a lapse (it may reach the operator after the reconcile at the deadline).
const RenewalMargin = 2 * time.Second

// leaseObservations records, per node, when the operator saw each new Lease renewal, on its
// own clock: liveness is judged from when renewals are seen, so a kubelet whose clock is
// skewed from the operator's is neither dropped while it renews nor kept after it stopped.
type leaseObservations struct {
	mu   sync.Mutex
	seen map[string]leaseSeen
}

type leaseSeen struct {
	renew, at time.Time
}

func newLeaseObservations() *leaseObservations {
	return &leaseObservations{seen: map[string]leaseSeen{}}
}

// observe records that the node's Lease carried renew at now, unless that renewal was seen
// before.
func (o *leaseObservations) observe(node string, renew, now time.Time) {
	if o == nil || renew.IsZero() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.seen[node]; ok && s.renew.Equal(renew) {
		return
	}
	o.seen[node] = leaseSeen{renew: renew, at: now}
}

// withObservation adds to l when the operator saw its renewal, if it did.
func (o *leaseObservations) withObservation(l eligibility.NodeLease, node string) eligibility.NodeLease {
	if o == nil {
		return l
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.seen[node]; ok && s.renew.Equal(l.RenewTime) {
		l.ObservedAt = s.at
	}
	return l
}

// restart records renew as seen at now, whenever it was seen before: the node's bound
// starts again (the node Lease guard, when a hold ends).
func (o *leaseObservations) restart(node string, renew, now time.Time) {
	if o == nil || renew.IsZero() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[node] = leaseSeen{renew: renew, at: now}
}

func (o *leaseObservations) forget(node string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, node)
}

func nodeLease(l *coordinationv1.Lease) eligibility.NodeLease {
	var nl eligibility.NodeLease
	if l.Spec.RenewTime != nil {
		nl.RenewTime = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		nl.DurationSecs = *l.Spec.LeaseDurationSeconds
	}
	return nl
}
