package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/store"
)

// TestRecordChangesQuietEndpoints checks that QuietEndpoints (--endpoint-events=false) drops
// the per-endpoint Events and nothing else: one Event per change otherwise.
func TestRecordChangesQuietEndpoints(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	reg := &v1alpha1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "reg"}}
	changes := store.Changes{
		Create: []store.Endpoint{{Pod: "p", Address: "10.0.0.1"}},
		Delete: []store.Record{{Endpoint: store.Endpoint{Pod: "gone", Address: "10.0.0.2"}}},
	}
	for _, tt := range []struct {
		quiet bool
		want  int
	}{{quiet: false, want: 2}, {quiet: true, want: 0}} {
		rec := events.NewFakeRecorder(10)
		r := &ServiceRegistryReconciler{Recorder: rec, Clock: clocktesting.NewFakePassiveClock(time.Unix(100, 0)), QuietEndpoints: tt.quiet}
		s := &reconcileScope{reg: reg, target: store.Scope{Service: "svc", Namespace: "ns"},
			byName: map[string]selectedPod{"p": {pod: pod, verdict: eligibility.Verdict{State: v1alpha1.EndpointRegistered}}}}
		r.recordChanges(s, changes)
		if got := len(rec.Events); got != tt.want {
			t.Errorf("QuietEndpoints=%v: %d Events, want %d", tt.quiet, got, tt.want)
		}
	}
}
