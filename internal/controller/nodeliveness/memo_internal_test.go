package nodeliveness

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/internal/eligibility"
)

func TestLeaseMemo(t *testing.T) {
	renew := metav1.NewMicroTime(time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC))
	lease := func(ns, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: coordinationv1.LeaseSpec{RenewTime: &renew, LeaseDurationSeconds: ptr.To[int32](40)}}
	}
	m := newLeaseMemo()
	if _, ok := m.get("node-a"); ok {
		t.Fatal("an empty memo holds node-a")
	}
	m.record(lease(LeaseNamespace, "node-a"))
	m.record(lease("default", "node-b")) // not a node Lease
	l, ok := m.get("node-a")
	if !ok || !l.RenewTime.Equal(renew.Time) || l.DurationSecs != 40 {
		t.Fatalf("node-a = %+v, %v; want renewed at %v for 40 s", l, ok, renew.Time)
	}
	if _, ok := m.get("node-b"); ok {
		t.Error("a Lease of another namespace was recorded")
	}
	later := metav1.NewMicroTime(renew.Add(10 * time.Second))
	renewed := lease(LeaseNamespace, "node-a")
	renewed.Spec.RenewTime = &later
	m.record(renewed)
	if l, _ := m.get("node-a"); !l.RenewTime.Equal(later.Time) {
		t.Errorf("after a renewal node-a = %+v, want renewed at %v", l, later.Time)
	}
	m.leaseDeleted("node-a", eligibility.NodeLease{}, false) // deleted, no pod left on node-a
	if _, ok := m.get("node-a"); ok {
		t.Error("node-a is still held after its Lease was deleted")
	}
	if m.size() != 0 {
		t.Errorf("memo holds %d nodes, want 0", m.size())
	}
	var none *leaseMemo // a reconciler without the Lease watch
	none.record(lease(LeaseNamespace, "node-a"))
	none.leaseDeleted("node-a", eligibility.NodeLease{}, true)
	none.nodeDeleted("node-a", true)
	none.nodeCreated("node-a")
	none.dropTombstones("node-a")
	if none.tombstoned("node-a") {
		t.Error("a nil memo holds a tombstone")
	}
}

// Issue 34, defect 3: the memo keeps what the API server said of a node that is gone, while
// the node has pods, and only then.
func TestLeaseMemoTombstones(t *testing.T) {
	renew := time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC)
	last := eligibility.NodeLease{RenewTime: renew, DurationSecs: 40, ObservedAt: renew.Add(time.Second)}
	m := newLeaseMemo()
	m.record(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: LeaseNamespace, Name: "node-a"},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renew}, LeaseDurationSeconds: ptr.To[int32](40)}})

	m.leaseDeleted("node-a", last, true) // its pods remain
	l, ok := m.get("node-a")
	if want := (eligibility.NodeLease{RenewTime: renew, DurationSecs: 40, ObservedAt: renew.Add(time.Second), Deleted: true}); !ok || l != want {
		t.Fatalf("node-a = %+v, %v after its Lease was deleted; want the tombstone %+v", l, ok, want)
	}
	m.nodeDeleted("node-a", true)
	if l, _ := m.get("node-a"); !l.Deleted || !l.NodeDeleted || !m.tombstoned("node-a") {
		t.Errorf("node-a = %+v after its Node was deleted, want Deleted and NodeDeleted", l)
	}
	if !m.nodeCreated("node-a") {
		t.Error("a Node created again under a deleted one's name was not reported as back")
	}
	if l, _ := m.get("node-a"); l.NodeDeleted || !l.Deleted {
		t.Errorf("node-a = %+v after its Node was created again, want only the Lease tombstone", l)
	}
	m.record(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: LeaseNamespace, Name: "node-a"},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renew.Add(time.Minute)}, LeaseDurationSeconds: ptr.To[int32](40)}})
	if l, _ := m.get("node-a"); l.Gone() || !l.RenewTime.Equal(renew.Add(time.Minute)) || m.tombstoned("node-a") {
		t.Errorf("node-a = %+v after a new Lease, want the new Lease alone", l)
	}

	m.nodeDeleted("node-b", false) // no pod on it: nothing to keep out
	if _, ok := m.get("node-b"); ok {
		t.Error("a deleted node without pods was kept")
	}
	m.nodeDeleted("node-c", true)
	m.dropTombstones("node-c") // its last pod was deleted
	if _, ok := m.get("node-c"); ok || m.size() != 1 {
		t.Errorf("node-c kept after its last pod was deleted (memo holds %d nodes, want node-a alone)", m.size())
	}
}
