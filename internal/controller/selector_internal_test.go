package controller

import (
	"context"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller/statuswriter"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/warmup"
)

// Issue 13, hole 8: a registry whose selector cannot be parsed (stored before the CRD
// validated selectors, or rejected by a newer Kubernetes) never keeps the endpoint of an
// ineligible pod: of its own records it keeps only those of pods that still exist, with
// the same UID, and are eligible; it registers nothing new.
func TestInvalidSelectorKeepsOnlyEligibleRecords(t *testing.T) {
	now := time.Now()
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
			Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In"}}},
			Ports:    []v1beta1.ServicePort{{Name: "http", Port: 8080}},
		},
	}
	pod := func(name string, ready bool) *corev1.Pod {
		st := corev1.ConditionTrue
		if !ready {
			st = corev1.ConditionFalse
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: k8stypes.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{
				{Type: corev1.ContainersReady, Status: st, LastTransitionTime: metav1.NewTime(now)}}},
		}
	}
	alive, dead := pod("alive", true), pod("dead", false)
	recreated := pod("recreated", true)
	recreated.UID = "uid-new"
	mem := &memStore{records: map[string]store.Record{}}
	for i, name := range []string{"alive", "dead", "gone", "recreated"} {
		mem.records[name] = store.Record{Revision: int64(i + 1), Endpoint: store.Endpoint{
			Service: "web", Namespace: "ns", Pod: name, UID: "uid-" + name, Address: "10.0.0.1",
			Ports: map[string]int32{"http": 8080}, Owner: "reg-uid"}}
	}
	mem.records["foreign"] = store.Record{Revision: 9, Endpoint: store.Endpoint{Service: "web", Namespace: "ns", Pod: "foreign", UID: "x", Owner: "someone-else"}}
	mem.rev = 10
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(reg, alive, dead, recreated).
		WithStatusSubresource(&v1beta1.ServiceRegistry{}, &corev1.Pod{}).Build()
	r := &ServiceRegistryReconciler{
		Client: c, Stores: oneStore(t, mem), Recorder: events.NewFakeRecorder(100), Clock: clocktesting.NewFakePassiveClock(now),
		warmups: warmup.NewTracker(1),
		status:  statuswriter.New(c, statuswriter.Config{Workers: 1, RetryBase: time.Millisecond, RetryMax: time.Second}),
	}
	r.components(c)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(reg)}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	var got []string
	for name := range mem.records {
		got = append(got, name)
	}
	sort.Strings(got)
	if want := []string{"alive", "foreign"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("store holds %v, want %v (an invalid selector keeps only provably eligible pods, and never touches foreign keys)", got, want)
	}
}
