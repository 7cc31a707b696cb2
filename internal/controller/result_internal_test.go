package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller/nodeliveness"
	"github.com/registrar-dev/registrar/internal/controller/statuswriter"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/internal/warmup"
)

// oneStore names s as the installation's only store, as cmd does for --stores=etcd.
func oneStore(t *testing.T, s store.Store) *multi.Stores {
	t.Helper()
	stores, err := multi.New([]multi.Named{{Name: "etcd", Store: s}}, []string{"etcd"})
	if err != nil {
		t.Fatal(err)
	}
	return stores
}

// memStore is a minimal store.Store for unit tests of the reconcile flow.
type memStore struct {
	mu      sync.Mutex
	records map[string]store.Record
	rev     int64
}

func (m *memStore) List(_ context.Context, _ store.Scope) ([]store.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Record
	for _, r := range m.records {
		out = append(out, r)
	}
	return out, nil
}

func (m *memStore) Apply(_ context.Context, _ store.Scope, ch store.Changes) ([]store.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == nil {
		m.records = map[string]store.Record{}
	}
	var written []store.Record
	for _, d := range ch.Delete {
		delete(m.records, d.Pod)
	}
	for _, e := range append(append([]store.Endpoint(nil), ch.Create...), updated(ch)...) {
		m.rev++
		rec := store.Record{Endpoint: e, Revision: m.rev}
		m.records[e.Pod] = rec
		written = append(written, rec)
	}
	return written, nil
}

func updated(ch store.Changes) []store.Endpoint {
	var out []store.Endpoint
	for _, u := range ch.Update {
		out = append(out, u.New)
	}
	return out
}

// Issue 13, hole 11: a Reconcile that fails to flip a gate must still come back by the time
// a node Lease of its pods lapses (controller-runtime drops a Result returned with an error).
func TestReconcileKeepsLeaseRequeueWhenGateFlipFails(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakePassiveClock(now)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "reg-uid", Finalizers: []string{Finalizer}},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ports:    []v1beta1.ServicePort{{Name: "http", Port: 8080}},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "pod-uid", Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Spec: corev1.PodSpec{NodeName: "node-1", ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}},
			Containers: []corev1.Container{{Name: "app", Image: "x"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}},
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: nodeliveness.LeaseNamespace, Name: "node-1"},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now}, LeaseDurationSeconds: ptr.To[int32](40)},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(reg, pod, lease).
		WithStatusSubresource(&v1beta1.ServiceRegistry{}, &corev1.Pod{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
				if _, isPod := obj.(*corev1.Pod); isPod {
					return errors.New("injected: the API server refused the pod status patch")
				}
				return c.SubResource(sub).Patch(ctx, obj, p, o...)
			},
		}).Build()
	r := &ServiceRegistryReconciler{
		Client: c, Stores: oneStore(t, &memStore{}), Recorder: events.NewFakeRecorder(100), Clock: clk,
		NodeLeaseTimeout: 20 * time.Second,
		warmups:          warmup.NewTracker(1),
		status:           statuswriter.New(c, statuswriter.Config{Workers: 1, RetryBase: time.Millisecond, RetryMax: time.Second}),
	}
	r.components(c)
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(reg)})
	if err != nil {
		// controller-runtime ignores res when err is set: the re-check would be lost.
		t.Fatalf("Reconcile returned an error (%v) with %+v: the node Lease re-check is dropped", err, res)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 20*time.Second+time.Second {
		t.Fatalf("RequeueAfter %v, want within the node Lease's 20 s", res.RequeueAfter)
	}
	if res.RequeueAfter > 2*time.Second {
		t.Errorf("RequeueAfter %v: a failed gate flip is retried within 2 s", res.RequeueAfter)
	}
}
