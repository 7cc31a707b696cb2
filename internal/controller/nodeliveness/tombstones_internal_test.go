package nodeliveness

import (
	"context"
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

// Issue 34, defects 3 and 10: the tombstones of deleted nodes are kept while the nodes have
// pods, and go with their last pod: replacing every node of a cluster leaves nothing behind.
func TestNodeTombstonesGoWithTheLastPod(t *testing.T) {
	now := time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC)
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
	r := New(Config{Client: c, Clock: clocktesting.NewFakeClock(now), Timeout: 20 * time.Second})
	r.Watching()
	leases, nodes, pods := r.LeaseRenewedAfterLapse(), r.NodeEvents(), r.PodDeletedFromNode()
	ctx := context.Background()
	const n = 20
	var all []*corev1.Pod
	for i := range n {
		node := fmt.Sprintf("node-%d", i)
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: LeaseNamespace, Name: node},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now}, LeaseDurationSeconds: ptr.To[int32](40)}}
		leases.Create(event.CreateEvent{Object: lease})
		r.seen.observe(node, now, now)
		for j := range 2 {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-pod-%d", node, j)},
				Spec: corev1.PodSpec{NodeName: node}}
			if err := c.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			all = append(all, pod)
		}
		if !nodes.Delete(event.DeleteEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: node}}}) {
			t.Fatal("a Node deletion did not reach the node's registries")
		}
		leases.Delete(event.DeleteEvent{Object: lease})
		if l, ok := r.leases.get(node); !ok || !l.Deleted || !l.NodeDeleted || !l.ObservedAt.Equal(now) {
			t.Fatalf("%s = %+v, %v after its Node and Lease were deleted; want both tombstones, with the renewal seen", node, l, ok)
		}
	}
	if got := r.leases.size(); got != n {
		t.Fatalf("the memo holds %d nodes, want the %d deleted nodes that have pods", got, n)
	}
	if got := len(r.seen.seen); got != 0 {
		t.Errorf("%d renewal observations kept for deleted Leases, want 0", got)
	}
	for i, pod := range all {
		if err := c.Delete(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pods.Delete(ctx, event.DeleteEvent{Object: pod}, nil)
		if i%2 == 0 && !r.leases.tombstoned(pod.Spec.NodeName) {
			t.Errorf("%s forgotten while a pod of it remains", pod.Spec.NodeName)
		}
	}
	if got := r.leases.size(); got != 0 {
		t.Errorf("the memo holds %d nodes after every pod of the deleted nodes was deleted, want 0", got)
	}
}
