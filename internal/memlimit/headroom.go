package memlimit

import (
	"math"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
)

// MinHeadroom is the least the heap may grow past what the last collection left live before
// the next collection, whatever the pacing: a proportion of a small heap is a few MiB, and
// collecting every few MiB costs CPU for memory nobody would miss (Go's own floor is a 4 MiB
// heap, scaled by GOGC). In `make bench-sweep` at 1,000 pods the live heap is ~10 MiB, so
// GOGC 50 alone collected every ~5 MiB allocated; from 16 MiB live (5,000 pods: 20-28 MiB)
// the proportion is above the floor and the floor changes nothing. A 12 MiB floor raised
// the 5,000-pod peak RSS from ~97 to 103-106 MiB (docs/performance.md, "Go's pacing").
const MinHeadroom = 8 << 20

// liveHeap is the runtime metric of the heap the last collection left live.
const liveHeap = "/gc/heap/live:bytes"

// HeadroomPercent is the pacing (GOGC) that lets a heap of live bytes grow by percent of
// itself, or by MinHeadroom when that is more, before the next collection; never more than
// MaxGCPercent.
func HeadroomPercent(percent int, live uint64) int {
	if live == 0 {
		return MaxGCPercent
	}
	need := int(math.Ceil(float64(MinHeadroom) * 100 / float64(live)))
	return min(max(percent, need), MaxGCPercent)
}

// KeepHeadroom paces the collector at percent, raised after every collection as
// HeadroomPercent says for what it left live; set applies a pacing (debug.SetGCPercent in the
// operator). It runs from a finalizer that re-arms itself once per collection: no goroutine,
// no timer. stop ends it (the pacing stays as last set).
func KeepHeadroom(percent int, set func(int) int) (stop func()) {
	var stopped atomic.Bool
	current := percent
	sample := []metrics.Sample{{Name: liveHeap}}
	var arm func()
	arm = func() {
		s := &sentinel{}
		runtime.SetFinalizer(s, func(*sentinel) {
			if stopped.Load() {
				return
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				if want := HeadroomPercent(percent, sample[0].Value.Uint64()); want != current {
					current = want // only this finalizer's chain reads or writes it
					set(want)
				}
			}
			arm()
		})
	}
	arm()
	return func() { stopped.Store(true) }
}

// sentinel is allocated only to be collected: large enough and with a pointer so that the
// runtime's tiny allocator does not share its block (a finalizer on a shared block may never
// run).
type sentinel struct {
	_ *int
	_ [16]byte
}
