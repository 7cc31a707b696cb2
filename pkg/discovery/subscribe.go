package discovery

import (
	"context"
	"time"
)

// Change is what changed between two views of the service.
type Change struct {
	// Added, Removed and Updated are instances in key order; Removed holds their last
	// known value.
	Added, Removed, Updated []Instance
	// Instances is the whole list after the change (shared: do not modify).
	Instances []Instance
	// Connected is whether the watch is alive; a change of it alone is a Change too.
	Connected bool
	// LastSync is when the store last confirmed the list.
	LastSync time.Time
}

// Subscription delivers changes of the list. It holds no goroutine and no queue: Next
// compares the list it last returned with the current one, so a slow reader sees the net
// change (an instance added and removed between two calls does not appear) and the Client
// never waits for it.
type Subscription struct {
	c        *Client
	wake     chan struct{}
	closed   chan struct{}
	last     *snapshot
	lastConn bool
}

// Subscribe returns a Subscription whose first Next returns every current instance as
// Added (once the client has a list). Close it when done.
func (c *Client) Subscribe() *Subscription {
	s := &Subscription{c: c, wake: make(chan struct{}, 1), closed: make(chan struct{}), last: &snapshot{}}
	c.subsMu.Lock()
	c.subs[s] = struct{}{}
	c.subsMu.Unlock()
	return s
}

// Close ends the subscription; a blocked Next returns ErrClosed.
func (s *Subscription) Close() {
	s.c.subsMu.Lock()
	defer s.c.subsMu.Unlock()
	if _, ok := s.c.subs[s]; ok {
		delete(s.c.subs, s)
		close(s.closed)
	}
}

// Next blocks until the list or the connection state differs from what the previous Next
// returned, and returns the difference. It returns ErrClosed after Close (of the
// Subscription or the Client) and ctx's error when ctx is done.
func (s *Subscription) Next(ctx context.Context) (Change, error) {
	for {
		cur, conn := s.c.snap.Load(), s.c.connected.Load()
		if cur != s.last || conn != s.lastConn {
			ch := diff(s.last, cur)
			connChanged := conn != s.lastConn
			s.last, s.lastConn = cur, conn
			if connChanged || len(ch.Added)+len(ch.Removed)+len(ch.Updated) > 0 {
				ch.Connected, ch.LastSync = conn, s.c.LastSync()
				return ch, nil
			}
		}
		select {
		case <-ctx.Done():
			return Change{}, ctx.Err()
		case <-s.closed:
			return Change{}, ErrClosed
		case <-s.c.done:
			return Change{}, ErrClosed
		case <-s.wake:
		}
	}
}

// notify wakes every subscription without blocking.
func (c *Client) notify() {
	c.subsMu.Lock()
	defer c.subsMu.Unlock()
	for s := range c.subs {
		select {
		case s.wake <- struct{}{}:
		default: // already pending
		}
	}
}

// diff compares two sorted snapshots.
func diff(old, cur *snapshot) Change {
	ch := Change{Instances: cur.instances}
	i, j := 0, 0
	for i < len(old.instances) || j < len(cur.instances) {
		switch {
		case j == len(cur.instances) || (i < len(old.instances) && old.instances[i].Key < cur.instances[j].Key):
			ch.Removed = append(ch.Removed, old.instances[i])
			i++
		case i == len(old.instances) || cur.instances[j].Key < old.instances[i].Key:
			ch.Added = append(ch.Added, cur.instances[j])
			j++
		default:
			if old.instances[i].Revision != cur.instances[j].Revision {
				ch.Updated = append(ch.Updated, cur.instances[j])
			}
			i, j = i+1, j+1
		}
	}
	return ch
}
