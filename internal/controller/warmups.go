package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// warmupJob is the warm-up of one pod, started by a reconcile and run in the background.
type warmupJob struct {
	registry types.NamespacedName
	pod      types.NamespacedName
	uid      types.UID
	// newRun, called only when the warm-up starts, returns the function that warms the pod
	// up and records the outcome on it; that reports whether the outcome was recorded
	// (false: cancelled, or the pod could not be updated).
	newRun func() func(ctx context.Context) bool
}

// warmupTracker runs warm-ups off the reconcile path: at most one per pod, at most
// cap(slots) at once, each cancelled as soon as a reconcile sees that its pod is no longer
// warming up (deleted, terminating, not ready). It is a manager Runnable, so warm-ups run only
// on the leader and stop with the manager.
type warmupTracker struct {
	base   context.Context
	cancel context.CancelFunc
	slots  chan struct{}

	mu   sync.Mutex
	runs map[types.NamespacedName]map[types.UID]*warmupRun
}

type warmupRun struct {
	cancel context.CancelFunc
}

func newWarmupTracker(maxConcurrent int) *warmupTracker {
	base, cancel := context.WithCancel(context.Background())
	return &warmupTracker{
		base: base, cancel: cancel, slots: make(chan struct{}, maxConcurrent),
		runs: map[types.NamespacedName]map[types.UID]*warmupRun{},
	}
}

// Start blocks until ctx is done, then cancels every warm-up.
func (t *warmupTracker) Start(ctx context.Context) error {
	<-ctx.Done()
	t.cancel()
	return nil
}

// sync makes the warm-ups of one registry match jobs (keyed by pod UID): it starts the
// missing ones and cancels and forgets those whose pod is no longer warming up. A finished
// warm-up is not started again while the cache still shows its pod warming.
func (t *warmupTracker) sync(registry types.NamespacedName, jobs map[types.UID]warmupJob) {
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
			runs = map[types.UID]*warmupRun{}
			t.runs[registry] = runs
		}
		runs[uid] = t.start(job)
	}
	if len(runs) == 0 {
		delete(t.runs, registry)
	}
}

func (t *warmupTracker) start(job warmupJob) *warmupRun {
	ctx, cancel := context.WithCancel(t.base)
	run := &warmupRun{cancel: cancel}
	warmUp := job.newRun()
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
			t.forget(job, run) // let the next reconcile start it again
		}
	}()
	return run
}

func (t *warmupTracker) forget(job warmupJob, run *warmupRun) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if runs := t.runs[job.registry]; runs[job.uid] == run {
		delete(runs, job.uid)
	}
}
