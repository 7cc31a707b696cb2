package controlplane

import (
	"sync"
	"time"
)

// Kind is what a transition does to a pod's endpoint.
type Kind int

// Transition kinds.
const (
	Register Kind = iota
	Deregister
)

func (k Kind) String() string {
	if k == Register {
		return "register"
	}
	return "deregister"
}

// Cause is the API write that makes a transition.
type Cause string

// Causes the harness writes.
const (
	CauseReady   Cause = "ready"   // pod status: ContainersReady and Ready True
	CauseUnready Cause = "unready" // pod status: ContainersReady and Ready False
	CauseDelete  Cause = "delete"  // pod deleted (grace period 0)
)

// KindOf is the endpoint change a cause calls for.
func KindOf(c Cause) Kind {
	if c == CauseReady {
		return Register
	}
	return Deregister
}

type pendingTransition struct {
	kind  Kind
	cause Cause
	at    time.Time
}

// Tracker matches one system's observed changes with the transitions the harness wrote. It
// is safe for concurrent use: the writer calls Expect before each write, the system's watcher
// calls Observe and Write.
type Tracker struct {
	mu         sync.Mutex
	pending    map[string]pendingTransition
	lags       map[Cause][]time.Duration
	expected   int
	unexpected int
	lost       int
	unmeasured int
	writes     int
	// explained counts the writes that showed a pending transition (the first matched
	// observation after a Write); writeOpen is set by Write until then.
	explained  int
	writeOpen  bool
	resumed    int
	relisted   int
	roundStart time.Time
	lastSeen   time.Time
	busy       time.Duration
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{pending: map[string]pendingTransition{}, lags: map[Cause][]time.Duration{}}
}

// Expect notes a transition of pod written at at. A transition still pending for the pod is
// counted lost: the system never showed it.
func (t *Tracker) Expect(pod string, cause Cause, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.pending[pod]; ok {
		t.lost++
	}
	if t.roundStart.IsZero() {
		t.roundStart = at
	}
	t.expected++
	t.pending[pod] = pendingTransition{kind: KindOf(cause), cause: cause, at: at}
}

// Cancel withdraws the pending transition of pod (its write failed).
func (t *Tracker) Cancel(pod string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.pending[pod]; ok {
		delete(t.pending, pod)
		t.expected--
	}
}

// Observe records that the system showed kind for pod at at. It matches the pod's pending
// transition of that kind; anything else is unexpected (a write no transition called for).
func (t *Tracker) Observe(pod string, kind Kind, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.take(pod, kind)
	if !ok {
		return
	}
	t.lags[p.cause] = append(t.lags[p.cause], at.Sub(p.at))
	if t.writeOpen {
		t.explained++
		t.writeOpen = false
	}
	if at.After(t.lastSeen) {
		t.lastSeen = at
	}
}

// Write counts one write of the system (a store event, an EndpointSlice change).
func (t *Tracker) Write() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writes++
	t.writeOpen = true
}

// WriteCounts are the system's writes so far and how many of them showed a transition the
// harness wrote (a system's watch reports a write, then the pods it changed): the rest are
// writes no transition called for (a rewrite, a change of nothing the watch tracks).
func (t *Tracker) WriteCounts() (writes, explained int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.writes, t.explained
}

// Pending is how many transitions the system has not shown yet.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// EndRound counts what is still pending as lost and adds the round's span (first write to
// last observation) to the busy time that the sustained rate is computed over.
func (t *Tracker) EndRound() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lost += len(t.pending)
	t.pending = map[string]pendingTransition{}
	if !t.roundStart.IsZero() && t.lastSeen.After(t.roundStart) {
		t.busy += t.lastSeen.Sub(t.roundStart)
	}
	t.roundStart, t.lastSeen = time.Time{}, time.Time{}
}

// Result summarises the tracker; call it after the last EndRound.
func (t *Tracker) Result(name string) SystemResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := SystemResult{Name: name, Transitions: t.expected, Lost: t.lost, Unexpected: t.unexpected,
		Unmeasured: t.unmeasured, WatchResumed: t.resumed, WatchRelisted: t.relisted,
		Writes: t.writes, ByCause: map[Cause]LagStats{}}
	var reg, dereg []time.Duration
	for cause, lags := range t.lags {
		r.ByCause[cause] = Summarise(lags)
		r.Observed += len(lags)
		if KindOf(cause) == Register {
			reg = append(reg, lags...)
		} else {
			dereg = append(dereg, lags...)
		}
	}
	r.Registration, r.Deregistration = Summarise(reg), Summarise(dereg)
	if t.expected > 0 {
		r.WritesPerTransition = float64(t.writes) / float64(t.expected)
	}
	if t.busy > 0 {
		r.Sustained = float64(r.Observed) / t.busy.Seconds()
	}
	r.BusySeconds = t.busy.Seconds()
	return r
}

// Unexpected counts a write that no transition called for.
func (t *Tracker) Unexpected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unexpected++
}

// ObserveIfPending is Observe for systems that show one transition as several events: events
// after the first are ignored rather than counted unexpected.
func (t *Tracker) ObserveIfPending(pod string, kind Kind, at time.Time) {
	t.mu.Lock()
	_, ok := t.pending[pod]
	t.mu.Unlock()
	if ok {
		t.Observe(pod, kind, at)
	}
}

// take removes and returns pod's pending transition of kind; without one, the change is
// counted unexpected. t.mu is held.
func (t *Tracker) take(pod string, kind Kind) (pendingTransition, bool) {
	p, ok := t.pending[pod]
	if !ok || p.kind != kind {
		t.unexpected++
		return p, false
	}
	delete(t.pending, pod)
	return p, true
}

// Gap records that the system showed kind for pod while its timing watch was not watching
// (a relist found the change): the pending transition of that kind is unmeasured, shown but
// without a lag. A change no transition called for is unexpected.
func (t *Tracker) Gap(pod string, kind Kind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.take(pod, kind); ok {
		t.unmeasured++
	}
}

// Resumed counts a timing watch that ended and resumed from its last position.
func (t *Tracker) Resumed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.resumed++
}

// Relisted counts a timing watch that lost its position and listed again.
func (t *Tracker) Relisted() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.relisted++
}
