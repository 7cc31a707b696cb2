package controller

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	m.record(lease(NodeLeaseNamespace, "node-a"))
	m.record(lease("default", "node-b")) // not a node Lease
	l, ok := m.get("node-a")
	if !ok || !l.RenewTime.Equal(renew.Time) || l.DurationSecs != 40 {
		t.Fatalf("node-a = %+v, %v; want renewed at %v for 40 s", l, ok, renew.Time)
	}
	if _, ok := m.get("node-b"); ok {
		t.Error("a Lease of another namespace was recorded")
	}
	later := metav1.NewMicroTime(renew.Add(10 * time.Second))
	renewed := lease(NodeLeaseNamespace, "node-a")
	renewed.Spec.RenewTime = &later
	m.record(renewed)
	if l, _ := m.get("node-a"); !l.RenewTime.Equal(later.Time) {
		t.Errorf("after a renewal node-a = %+v, want renewed at %v", l, later.Time)
	}
	m.forget(lease("default", "node-a")) // another namespace's Lease of that name
	if _, ok := m.get("node-a"); !ok {
		t.Error("forgetting another namespace's Lease dropped node-a")
	}
	m.forget(lease(NodeLeaseNamespace, "node-a"))
	if _, ok := m.get("node-a"); ok {
		t.Error("node-a is still held after its Lease was deleted")
	}
	var none *leaseMemo // a reconciler without the Lease watch
	none.record(lease(NodeLeaseNamespace, "node-a"))
	none.forget(lease(NodeLeaseNamespace, "node-a"))
}
