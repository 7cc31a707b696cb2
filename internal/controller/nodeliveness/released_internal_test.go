package nodeliveness

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Issue 34, defect 10: the node Lease guard's released nodes (leaseguard.Releaser) are
// forgotten when a node's Lease is deleted: a cluster that replaces its nodes must not grow
// the set with every node it ever released.
func TestReleasedNodesForgottenWithTheirLease(t *testing.T) {
	now := time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&corev1.Pod{}, PodNodeNameField, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		Build()
	r := New(Config{Client: c, Clock: clk, Timeout: 20 * time.Second})
	r.Watching()
	pred := r.LeaseRenewedAfterLapse()
	const n = 50
	for i := range n {
		node := fmt.Sprintf("node-%d", i)
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: LeaseNamespace, Name: node},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-time.Minute)}, LeaseDurationSeconds: ptr.To[int32](40)}}
		pred.Create(event.CreateEvent{Object: lease})
		clk.Step(time.Second)
		if !r.guard().releaser.Released(node, 1, clk.Now()) {
			t.Fatalf("%s was not released at one node per second", node)
		}
		pred.Delete(event.DeleteEvent{Object: lease}) // the node is gone, and its Lease with it
	}
	if got := r.guard().releaser.ReleasedNodes(); len(got) != 0 {
		t.Errorf("%d released nodes kept after their Leases were deleted, want 0: %v", len(got), got)
	}

	// A Node deleted (its Lease not yet garbage-collected) is forgotten as well.
	nodes := r.NodeEvents()
	for i := range n {
		node := fmt.Sprintf("gone-%d", i)
		clk.Step(time.Second)
		if !r.guard().releaser.Released(node, 1, clk.Now()) {
			t.Fatalf("%s was not released at one node per second", node)
		}
		nodes.Delete(event.DeleteEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: node}}})
	}
	if got := r.guard().releaser.ReleasedNodes(); len(got) != 0 {
		t.Errorf("%d released nodes kept after their Nodes were deleted, want 0: %v", len(got), got)
	}
	if r.leases.size() != 0 {
		t.Errorf("the Lease memo holds %d nodes, all deleted without pods, want 0", r.leases.size())
	}
}
