package controlplane

import (
	"context"
	"sync"
	"time"
)

// Faults of the timing watches (-fault-watch-cut, -fault-watch-relist): they make a short run
// prove what a long one on an overloaded API server needs, that a timing watch survives its
// end and the loss of its position.

// maxRelistPause bounds how long a relist fault leaves a watch stopped.
const maxRelistPause = time.Second

// watchFaults are what one timing watch receives: a cut closes it, a relist makes it lose its
// position (as 410 Gone or a compacted revision would) for pause, after which it lists again.
// Nil channels never fire.
type watchFaults struct {
	cut, relist <-chan struct{}
	pause       time.Duration
}

// faultInjector sends every registered watch a cut every cutEvery and a relist every
// relistEvery (zero: never) until its context ends.
type faultInjector struct {
	mu              sync.Mutex
	cuts, relists   []chan struct{}
	cutOn, relistOn bool
	pause           time.Duration
}

// relistPause is how long a relist fault every period leaves a watch stopped: half the
// period, at most maxRelistPause.
func relistPause(period time.Duration) time.Duration { return min(period/2, maxRelistPause) }

func startFaults(ctx context.Context, cutEvery, relistEvery time.Duration) *faultInjector {
	f := &faultInjector{cutOn: cutEvery > 0, relistOn: relistEvery > 0, pause: relistPause(relistEvery)}
	tick := func(every time.Duration, chans func() []chan struct{}) {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				for _, c := range chans() {
					select {
					case c <- struct{}{}:
					default: // the last one is not handled yet
					}
				}
			}
		}
	}
	if f.cutOn {
		go tick(cutEvery, func() []chan struct{} { f.mu.Lock(); defer f.mu.Unlock(); return f.cuts })
	}
	if f.relistOn {
		go tick(relistEvery, func() []chan struct{} { f.mu.Lock(); defer f.mu.Unlock(); return f.relists })
	}
	return f
}

// watch registers one timing watch.
func (f *faultInjector) watch() watchFaults {
	if f == nil {
		return watchFaults{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := watchFaults{pause: f.pause}
	if f.cutOn {
		c := make(chan struct{}, 1)
		f.cuts = append(f.cuts, c)
		w.cut = c
	}
	if f.relistOn {
		c := make(chan struct{}, 1)
		f.relists = append(f.relists, c)
		w.relist = c
	}
	return w
}
