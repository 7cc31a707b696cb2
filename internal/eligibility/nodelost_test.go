package eligibility

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Issue 34, defect 3: a node that is gone keeps its pods out; only a new Lease renewing
// brings them back.
func TestNodeLost(t *testing.T) {
	t0 := time.Unix(20_000, 0)
	const maxAge = 20 * time.Second
	live := NodeLease{RenewTime: t0, DurationSecs: 40}                     // lapses at t0+20 s (the cap)
	lapsed := NodeLease{RenewTime: t0.Add(-time.Minute), DurationSecs: 40} // lapsed at t0-40 s
	with := func(l NodeLease, mutate func(*NodeLease)) NodeLease { mutate(&l); return l }
	for _, tt := range []struct {
		name        string
		lease       NodeLease
		now         time.Time
		wantLost    bool
		wantRecheck time.Time
	}{
		{name: "live Lease", lease: live, now: t0.Add(5 * time.Second), wantRecheck: t0.Add(maxAge)},
		{name: "lapsed Lease", lease: lapsed, now: t0, wantLost: true, wantRecheck: t0.Add(LapsedLeaseRecheck)},
		{name: "Lease deleted after it lapsed", lease: with(lapsed, func(l *NodeLease) { l.Deleted = true }), now: t0,
			wantLost: true, wantRecheck: t0.Add(LapsedLeaseRecheck)},
		{name: "Lease deleted while live: alive until its last renewal runs out",
			lease: with(live, func(l *NodeLease) { l.Deleted = true }), now: t0.Add(5 * time.Second), wantRecheck: t0.Add(maxAge)},
		{name: "Lease deleted while live, its last renewal run out",
			lease: with(live, func(l *NodeLease) { l.Deleted = true }), now: t0.Add(maxAge), wantLost: true,
			wantRecheck: t0.Add(maxAge + LapsedLeaseRecheck)},
		{name: "Node deleted while its Lease was live", lease: with(live, func(l *NodeLease) { l.NodeDeleted = true }),
			now: t0.Add(time.Second), wantLost: true, wantRecheck: t0.Add(time.Second + LapsedLeaseRecheck)},
		{name: "Node and Lease deleted after the lapse", lease: with(lapsed, func(l *NodeLease) { l.Deleted, l.NodeDeleted = true, true }),
			now: t0, wantLost: true, wantRecheck: t0.Add(LapsedLeaseRecheck)},
		{name: "Node deleted, no Lease ever seen", lease: NodeLease{NodeDeleted: true}, now: t0, wantLost: true,
			wantRecheck: t0.Add(LapsedLeaseRecheck)},
		{name: "Node re-created with a new Lease renewing (the deletion forgotten)", lease: NodeLease{RenewTime: t0, DurationSecs: 40},
			now: t0.Add(time.Second), wantRecheck: t0.Add(maxAge)},
		{name: "Lease without a renewal", lease: NodeLease{DurationSecs: 40}, now: t0},
		{name: "deleted Lease without a renewal", lease: NodeLease{DurationSecs: 40, Deleted: true}, now: t0},
		{name: "kubelet 30 s behind, last renewal seen 1 s ago, Lease then deleted",
			lease: NodeLease{RenewTime: t0.Add(-31 * time.Second), ObservedAt: t0.Add(-time.Second), DurationSecs: 40, Deleted: true},
			now:   t0, wantRecheck: t0.Add(maxAge - time.Second)},
	} {
		lost, recheck := NodeLost(tt.lease, maxAge, tt.now)
		if lost != tt.wantLost || !recheck.Equal(tt.wantRecheck) {
			t.Errorf("%s: NodeLost = %v, re-check at %v; want %v, %v", tt.name, lost, recheck, tt.wantLost, tt.wantRecheck)
		}
	}
}

// The verdict chain: a pod on a node that is gone is NodeLeaseExpired; a node never seen (no
// NodeLease) leaves the pod to its own status.
func TestDecideOnDeletedNodes(t *testing.T) {
	t0 := time.Unix(20_000, 0)
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}}}
	for _, tt := range []struct {
		name   string
		lease  *NodeLease
		reason string
	}{
		{name: "node never seen", reason: v1beta1.ReasonContainersReady},
		{name: "Node deleted", lease: &NodeLease{RenewTime: t0, DurationSecs: 40, NodeDeleted: true}, reason: v1beta1.ReasonNodeLeaseExpired},
		{name: "lapsed Lease deleted", lease: &NodeLease{RenewTime: t0.Add(-time.Minute), DurationSecs: 40, Deleted: true},
			reason: v1beta1.ReasonNodeLeaseExpired},
		{name: "live Lease deleted", lease: &NodeLease{RenewTime: t0, DurationSecs: 40, Deleted: true}, reason: v1beta1.ReasonContainersReady},
	} {
		d := Decide(Facts{Pod: pod, NodeLease: tt.lease, LeaseMaxAge: 20 * time.Second, Now: t0.Add(time.Second)})
		if d.Reason != tt.reason {
			t.Errorf("%s: reason %s, want %s", tt.name, d.Reason, tt.reason)
		}
	}
}
