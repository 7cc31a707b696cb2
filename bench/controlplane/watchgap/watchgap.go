// Package watchgap decides what a benchmark timing watch does when its stream ends or reports
// an error, and what changed while it was not watching. It is pure: no clients, no clock.
//
// A timing watch resumes from the last position it processed after a watch that closed (the
// API server ended it, a connection dropped): nothing is missed. When that position has left
// the server's window (410 Gone, Expired; a compacted etcd revision) it lists again and
// resumes from the list; every object whose state differs between what the watch last knew
// and the list changed in the gap, at a time the watch never saw.
package watchgap

import (
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
)

// Step is what a watch does next.
type Step int

// Steps.
const (
	// Handle the event: a change of an object.
	Handle Step = iota
	// Skip it, keeping its resourceVersion as the position (a bookmark).
	Skip
	// Resume the watch from the last position processed.
	Resume
	// Relist: the position is gone; list again and resume from the list.
	Relist
)

func (s Step) String() string {
	return [...]string{"handle", "skip", "resume", "relist"}[s]
}

// OnEvent is the step for an API watch event.
func OnEvent(ev watch.Event) Step {
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		return Handle
	case watch.Bookmark:
		return Skip
	case watch.Error:
		return OnError(apierrors.FromObject(ev.Object))
	default:
		return Resume
	}
}

// OnError is the step after an error starting or reading an API watch: relist when the
// position is too old, otherwise resume from it (after Backoff).
func OnError(err error) Step {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return Relist
	}
	return Resume
}

// Diff compares what a watch knew (object -> in the registry) with a fresh list and returns
// the objects that entered and left the registry in the gap, sorted. An object missing from a
// map is not in the registry.
func Diff(known, listed map[string]bool) (entered, left []string) {
	for id, in := range listed {
		if in && !known[id] {
			entered = append(entered, id)
		}
	}
	for id, in := range known {
		if in && !listed[id] {
			left = append(left, id)
		}
	}
	slices.Sort(entered)
	slices.Sort(left)
	return entered, left
}

// Backoff is the wait before retry number attempt (0-based) of a failed watch or list:
// doubling from 100 ms, at most 5 s.
func Backoff(attempt int) time.Duration {
	const first, most = 100 * time.Millisecond, 5 * time.Second
	if attempt >= 6 { // 100 ms << 6 = 6.4 s
		return most
	}
	return min(first<<max(attempt, 0), most)
}
