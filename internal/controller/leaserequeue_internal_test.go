package controller

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A reconcile decides each pod's verdict at the time it reaches the pod and computes the
// Lease requeue after the store write: on a large registry under load, the earliest Lease
// (noted at the verdict, still live then) may have lapsed by the time the requeue is
// computed. The requeue must still be positive: controller-runtime drops a RequeueAfter <= 0
// as a plain success, and the registry then waits for an unrelated event (in the production
// scenario, seed 2: 58-64 s) before its lost nodes' pods leave the store.
func TestLeaseRequeueIsPositiveWhenTheLeaseLapsedDuringTheReconcile(t *testing.T) {
	now := time.Date(2026, 12, 4, 19, 4, 54, 0, time.UTC)
	r := &ServiceRegistryReconciler{Clock: clocktesting.NewFakePassiveClock(now)}
	for _, tc := range []struct {
		name       string
		leaseCheck time.Time
		min, max   time.Duration
	}{
		{"lapses later", now.Add(3 * time.Second), 3 * time.Second, 3*time.Second + 100*time.Millisecond},
		{"lapses now", now, time.Nanosecond, 100 * time.Millisecond},
		{"lapsed 40 ms ago", now.Add(-40 * time.Millisecond), time.Nanosecond, 100 * time.Millisecond},
		{"lapsed 300 ms ago (a slow reconcile)", now.Add(-300 * time.Millisecond), time.Nanosecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.leaseRequeue(&reconcileScope{leaseCheck: tc.leaseCheck})
			if got.RequeueAfter < tc.min || got.RequeueAfter > tc.max {
				t.Errorf("RequeueAfter %v; want within [%v, %v]", got.RequeueAfter, tc.min, tc.max)
			}
		})
	}
	if got := r.leaseRequeue(&reconcileScope{}); !got.IsZero() {
		t.Errorf("no Lease to watch: %+v; want no requeue", got)
	}
}
