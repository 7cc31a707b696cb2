package warmup

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Job is the warm-up of one pod, started by a reconcile and run in the background.
type Job struct {
	Registry types.NamespacedName
	Pod      types.NamespacedName
	UID      types.UID
	// NewRun, called only when the warm-up starts, returns the function that warms the pod
	// up and records the outcome on it; that reports whether the outcome was recorded
	// (false: cancelled, or the pod could not be updated).
	NewRun func() func(ctx context.Context) bool
}

// Tracker runs warm-ups off the reconcile path: at most one per pod, at most
// cap(slots) at once, each cancelled as soon as a reconcile sees that its pod is no longer
// warming up (deleted, terminating, not ready). It is a manager Runnable, so warm-ups run only
// on the leader and stop with the manager.
type Tracker struct {
	base   context.Context
	cancel context.CancelFunc
	slots  chan struct{}

	mu   sync.Mutex
	runs map[types.NamespacedName]map[types.UID]*trackedRun
}

type trackedRun struct {
	cancel context.CancelFunc
}

// NewTracker returns a Tracker that runs at most maxConcurrent warm-ups at once.
func NewTracker(maxConcurrent int) *Tracker {
	base, cancel := context.WithCancel(context.Background())
	return &Tracker{
		base: base, cancel: cancel, slots: make(chan struct{}, maxConcurrent),
		runs: map[types.NamespacedName]map[types.UID]*trackedRun{},
	}
}

// Start blocks until ctx is done, then cancels every warm-up.
func (t *Tracker) Start(ctx context.Context) error {
	<-ctx.Done()
	t.cancel()
	return nil
}

// Sync makes the warm-ups of one registry match jobs (keyed by pod UID): it starts the
// missing ones and cancels and forgets those whose pod is no longer warming up. A finished
// warm-up is not started again while the cache still shows its pod warming.
func (t *Tracker) Sync(registry types.NamespacedName, jobs map[types.UID]Job) {
	t.mu.Lock()
	defer t.mu.Unlock()
	runs := t.runs[registry]
	for uid, run := range runs {
		if _, still := jobs[uid]; !still {
			run.cancel()
			delete(runs, uid)
		}
	}
	for uid, job := range jobs {
		if _, running := runs[uid]; running {
			continue
		}
		if runs == nil {
			runs = map[types.UID]*trackedRun{}
			t.runs[registry] = runs
		}
		runs[uid] = t.start(job)
	}
	if len(runs) == 0 {
		delete(t.runs, registry)
	}
}

func (t *Tracker) start(job Job) *trackedRun {
	ctx, cancel := context.WithCancel(t.base)
	tr := &trackedRun{cancel: cancel}
	warmUp := job.NewRun()
	go func() {
		defer cancel()
		select {
		case t.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		recorded := warmUp(ctx)
		<-t.slots
		if !recorded {
			t.forget(job, tr) // let the next reconcile start it again
		}
	}()
	return tr
}

func (t *Tracker) forget(job Job, tr *trackedRun) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if runs := t.runs[job.Registry]; runs[job.UID] == tr {
		delete(runs, job.UID)
	}
}
