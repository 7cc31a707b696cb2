package main

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-dev/registrar/bench/controlplane"
)

// kind is what a transition does to a pod.
type kind int

const (
	// ready: a new pod's containers turn ready (the kubelet's status write). xDS clients have
	// it when the pod is HEALTHY in their ClusterLoadAssignment; discovery watchers when its
	// key is in their list.
	ready kind = iota
	// terminating: an old pod's deletion starts (the ReplicaSet scales down). xDS clients have
	// it when the pod is no longer HEALTHY (DRAINING, or gone); watchers when its key is gone.
	terminating
)

func (k kind) String() string {
	if k == ready {
		return "ready"
	}
	return "terminating"
}

// group is a set of observers that must all have a transition: the API watch floor (one
// plain watch), the state-of-the-world xDS clients, the delta xDS clients, the discovery
// watchers.
type group int

const (
	groupFloor group = iota
	groupSotw
	groupDelta
	groupWatchers
	groups
)

// transition is one pod transition of the rollout.
type transition struct {
	pod     string
	kind    kind
	written time.Time // the API write was sent (under the tracker's lock)
	seen    [groups]atomic.Int32
	done    [groups]atomic.Int64 // unix nanoseconds: when the last observer of the group had it
}

// doneAt is when every observer of g had the transition (zero: not yet).
func (tr *transition) doneAt(g group) time.Time {
	if ns := tr.done[g].Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

type tkey struct {
	pod  string
	kind kind
}

// tracker follows every transition to every observer. Observers report each pod change they
// see once (their own state's difference); a change of a pod with no transition of that
// kind (the initial sync) is not counted.
type tracker struct {
	mu     sync.RWMutex // byKey and order; observers only read them
	size   [groups]int  // observers per group
	byKey  map[tkey]*transition
	order  []*transition
	doneCh chan struct{} // signalled when a transition completes in some group
}

func newTracker(size [groups]int) *tracker {
	return &tracker{size: size, byKey: map[tkey]*transition{}, doneCh: make(chan struct{}, 1)}
}

// issue registers a transition before its API write is sent; written is set by wrote.
func (t *tracker) issue(pod string, k kind) *transition {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := &transition{pod: pod, kind: k}
	t.byKey[tkey{pod, k}] = tr
	t.order = append(t.order, tr)
	return tr
}

// wrote stamps the transition's API write (sent at at).
func (t *tracker) wrote(tr *transition, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr.written = at
}

// observe records that one observer of g has the transition (pod, k) at at.
func (t *tracker) observe(g group, pod string, k kind, at time.Time) {
	t.mu.RLock()
	tr := t.byKey[tkey{pod, k}]
	t.mu.RUnlock()
	if tr == nil {
		return
	}
	if n := tr.seen[g].Add(1); n == int32(t.size[g]) {
		tr.done[g].Store(at.UnixNano())
		select {
		case t.doneCh <- struct{}{}:
		default:
		}
	}
}

// complete tells whether every observer of g has every transition of pods (kind k).
func (t *tracker) complete(g group, k kind, pods []string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range pods {
		tr := t.byKey[tkey{p, k}]
		if tr == nil || (t.size[g] > 0 && tr.doneAt(g).IsZero()) {
			return false
		}
	}
	return true
}

// pending counts the transitions some observer (of a group with observers) does not have.
func (t *tracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, tr := range t.order {
		for g := range groups {
			if t.size[g] > 0 && tr.doneAt(g).IsZero() {
				n++
				break
			}
		}
	}
	return n
}

// Tails are the lags of one kind of transition to one set of observers.
type Tails struct {
	controlplane.LagStats
	// Missing transitions never reached every observer of the set.
	Missing int `json:"missing"`
}

// tails computes, for transitions of kind k, write → every observer of the groups gs had it
// (the latest of their completion times).
func (t *tracker) tails(k kind, gs ...group) Tails {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lags []time.Duration
	var out Tails
	for _, tr := range t.order {
		if tr.kind != k {
			continue
		}
		var last time.Time
		missing := false
		for _, g := range gs {
			if t.size[g] == 0 {
				continue
			}
			done := tr.doneAt(g)
			if done.IsZero() {
				missing = true
				break
			}
			if done.After(last) {
				last = done
			}
		}
		if missing || tr.written.IsZero() {
			out.Missing++
			continue
		}
		if last.IsZero() {
			continue
		}
		lags = append(lags, max(0, last.Sub(tr.written)))
	}
	out.LagStats = controlplane.Summarise(lags)
	return out
}
