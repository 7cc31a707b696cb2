package clients

import (
	"sync"
	"time"
)

// pushLagWindow is how many recent push lags (publish → one client's ACK) are kept per
// ClusterLoadAssignment for the drain advice.
const pushLagWindow = 128

// pushLags keeps, per ClusterLoadAssignment name, the last pushLagWindow lags from a change
// entering the cache to a client's ACK of it. Its own lock: ACKs arrive on stream
// goroutines while a publish may hold the server's lock.
type pushLags struct {
	mu     sync.Mutex
	byName map[string]*lagRing
}

type lagRing struct {
	lags []time.Duration
	next int
}

func (p *pushLags) add(name string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byName == nil {
		p.byName = map[string]*lagRing{}
	}
	r := p.byName[name]
	if r == nil {
		r = &lagRing{}
		p.byName[name] = r
	}
	if len(r.lags) < pushLagWindow {
		r.lags = append(r.lags, max(d, 0))
		return
	}
	r.lags[r.next] = max(d, 0)
	r.next = (r.next + 1) % pushLagWindow
}

func (p *pushLags) max(name string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var m time.Duration
	if r := p.byName[name]; r != nil {
		for _, d := range r.lags {
			m = max(m, d)
		}
	}
	return m
}

func (p *pushLags) forget(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byName, name)
}

// PushLag is the slowest of the last 128 measured pushes of the ClusterLoadAssignment name
// (a change entering the cache → a client's ACK of it); 0 when no client acknowledged a
// change of it yet.
func (a *Tracker) PushLag(name string) time.Duration { return a.lags.max(name) }

// ForgetPushLags drops the push lags of the ClusterLoadAssignment name (unpublished).
func (a *Tracker) ForgetPushLags(name string) { a.lags.forget(name) }
