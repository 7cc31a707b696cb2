package regstatus

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

// baseConditions are the conditions other than the kstatus ones.
func baseConditions(st v1beta1.ServiceRegistryStatus) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range st.Conditions {
		if c.Type != v1beta1.ConditionReconciling && c.Type != v1beta1.ConditionStalled {
			out = append(out, c)
		}
	}
	return out
}

func TestHealthConditions(t *testing.T) {
	a := pod("web-a", "10.0.0.1", vEligible)
	b := pod("web-b", "10.0.0.2", vEligible)
	warming := pod("web-w", "10.0.0.3", vWarming)
	unready := pod("web-u", "10.0.0.4", vUnready)
	noPort := pod("web-np", "10.0.0.5", vPortMissing)
	refusedPod := pod("web-r", "10.0.0.6", eligibility.Verdict{State: v1beta1.EndpointPending, Reason: v1beta1.ReasonServiceNameOwnedElsewhere})
	syncedFalseSince := func(since time.Time) v1beta1.ServiceRegistryStatus {
		return v1beta1.ServiceRegistryStatus{Conditions: []metav1.Condition{
			cond(v1beta1.ConditionStoreSynced, metav1.ConditionFalse, v1beta1.ReasonStoreUnreachable, "old", oldGen, since)}}
	}
	tests := []struct {
		name string
		old  v1beta1.ServiceRegistryStatus
		in   Input
		// typ is the kstatus condition expected True ("" for neither), with its reason.
		typ, reason string
		contains    string
	}{
		{name: "all registered", in: Input{Pods: []Pod{a, b}, Stored: stored(a, b)}},
		{name: "unready pods are not the registry's work", in: Input{Pods: []Pod{a, unready}, Stored: stored(a)}},
		{name: "no pods selected", in: Input{Stored: stored()}},
		{name: "missing port is reported by Ready only", in: Input{Pods: []Pod{a, noPort}, Stored: stored(a)}},
		{
			name: "eligible pod not yet written", in: Input{Pods: []Pod{a, b}, Stored: stored(a)},
			typ: v1beta1.ConditionReconciling, reason: v1beta1.ReasonNotInStore, contains: "1 eligible pods",
		},
		{
			name: "pod warming up", in: Input{Pods: []Pod{a, warming}, Stored: stored(a)},
			typ: v1beta1.ConditionReconciling, reason: v1beta1.ReasonWarmingUp, contains: "1 pods are warming up",
		},
		{
			name: "store just became unreachable", in: Input{Pods: []Pod{a}, StoreErr: errStore},
			typ: v1beta1.ConditionReconciling, reason: v1beta1.ReasonStoreUnreachable, contains: "retrying store",
		},
		{
			name: "store unreachable for less than the default limit", old: syncedFalseSince(now.Add(-DefaultStoreStallAfter + time.Second)),
			in:  Input{Pods: []Pod{a}, StoreErr: errStore},
			typ: v1beta1.ConditionReconciling, reason: v1beta1.ReasonStoreUnreachable, contains: "unreachable since 2025-06-07T08:07:11Z",
		},
		{
			name: "store unreachable for the default limit", old: syncedFalseSince(now.Add(-DefaultStoreStallAfter)),
			in:  Input{Pods: []Pod{a}, StoreErr: errStore},
			typ: v1beta1.ConditionStalled, reason: v1beta1.ReasonStoreUnreachable, contains: "unreachable since 2025-06-07T08:07:10Z (more than 2m0s)",
		},
		{
			name: "store unreachable beyond a configured limit", old: syncedFalseSince(now.Add(-30 * time.Second)),
			in:  Input{Pods: []Pod{a}, StoreErr: errStore, StoreStallAfter: 20 * time.Second},
			typ: v1beta1.ConditionStalled, reason: v1beta1.ReasonStoreUnreachable, contains: errStore.Error(),
		},
		{
			name: "an old StoreSynced=True does not count as an outage", old: oldStatus(),
			in:  Input{Pods: []Pod{a}, StoreErr: errStore},
			typ: v1beta1.ConditionReconciling, reason: v1beta1.ReasonStoreUnreachable,
		},
		{
			name: "invalid selector", in: Input{SelectorErr: errors.New("bad operator")},
			typ: v1beta1.ConditionStalled, reason: v1beta1.ReasonInvalidSelector, contains: "fix spec.selector: bad operator",
		},
		{
			name: "service name owned by another namespace", in: Input{Pods: []Pod{refusedPod}, Stored: stored(), Refused: "belongs to namespace ns-a"},
			typ: v1beta1.ConditionStalled, reason: v1beta1.ReasonServiceNameOwnedElsewhere, contains: "belongs to namespace ns-a",
		},
		{
			name: "refusal wins over an invalid selector and a store error", in: Input{Refused: "belongs to namespace ns-a", SelectorErr: errors.New("bad"), StoreErr: errStore},
			typ: v1beta1.ConditionStalled, reason: v1beta1.ReasonServiceNameOwnedElsewhere,
		},
		{
			name: "key conflict", in: Input{Pods: []Pod{a, b}, Stored: stored(a), Conflicts: []string{b.Name}},
			typ: v1beta1.ConditionStalled, reason: v1beta1.ReasonKeyConflict, contains: "distinct spec.serviceName",
		},
		{
			name: "store error wins over a conflict, as in Ready", in: Input{Pods: []Pod{a}, Conflicts: []string{a.Name}, StoreErr: errStore},
			typ: v1beta1.ConditionReconciling, reason: v1beta1.ReasonStoreUnreachable,
		},
		{
			name: "invalid annotations", in: Input{Pods: []Pod{a}, Stored: stored(a), Config: Configuration{Generated: true, Problems: `registrar.dev/port: "x"`}},
			typ: v1beta1.ConditionStalled, reason: v1beta1.ReasonInvalidAnnotation, contains: `registrar.dev/port: "x"`,
		},
		{
			name: "annotation problems of a hand-written registry are ignored", in: Input{Pods: []Pod{a}, Stored: stored(a), Config: Configuration{Problems: "x"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Generation, in.ServiceName, in.StoreName, in.Now = gen, "web", storeName, now
			got := Build(tt.old, in)
			rec, stall := meta.FindStatusCondition(got.Conditions, v1beta1.ConditionReconciling), meta.FindStatusCondition(got.Conditions, v1beta1.ConditionStalled)
			if tt.typ == "" {
				if rec != nil || stall != nil {
					t.Fatalf("Reconciling = %+v, Stalled = %+v, want neither", rec, stall)
				}
				return
			}
			if rec != nil && stall != nil {
				t.Fatalf("both Reconciling and Stalled are present: %+v, %+v", rec, stall)
			}
			c := meta.FindStatusCondition(got.Conditions, tt.typ)
			if c == nil {
				t.Fatalf("no %s condition: %+v", tt.typ, got.Conditions)
			}
			if c.Status != metav1.ConditionTrue || c.Reason != tt.reason || c.ObservedGeneration != gen || !strings.Contains(c.Message, tt.contains) {
				t.Errorf("%s = %+v, want True, reason %s, message containing %q", tt.typ, c, tt.reason, tt.contains)
			}
			if got.ObservedGeneration != gen {
				t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, gen)
			}
		})
	}
}

func TestHealthConditionTransitions(t *testing.T) {
	a := pod("web-a", "10.0.0.1", vEligible)
	b := pod("web-b", "10.0.0.2", vEligible)
	in := Input{Generation: gen, ServiceName: "web", StoreName: storeName, Pods: []Pod{a, b}, Stored: stored(a), Now: t0}

	first := Build(v1beta1.ServiceRegistryStatus{}, in)
	in.Now = now
	second := Build(first, in)
	c := meta.FindStatusCondition(second.Conditions, v1beta1.ConditionReconciling)
	if c == nil || !c.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("Reconciling that stays True = %+v, want lastTransitionTime %v", c, t0)
	}

	in.Stored = stored(a, b)
	done := Build(second, in)
	if c := meta.FindStatusCondition(done.Conditions, v1beta1.ConditionReconciling); c != nil {
		t.Errorf("Reconciling = %+v after convergence, want it removed", c)
	}
	if r := meta.FindStatusCondition(done.Conditions, v1beta1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", r)
	}

	in.Conflicts = []string{b.Name}
	stalled := Build(done, in)
	if s := meta.FindStatusCondition(stalled.Conditions, v1beta1.ConditionStalled); s == nil || !s.LastTransitionTime.Time.Equal(now) {
		t.Errorf("Stalled = %+v, want True since %v", s, now)
	}
}

// A retry during an outage must produce the same status, or every retry would write it
// and trigger another reconcile.
func TestHealthStableDuringOutage(t *testing.T) {
	a := pod("web-a", "10.0.0.1", vEligible)
	in := Input{Generation: gen, ServiceName: "web", StoreName: storeName, Pods: []Pod{a}, StoreErr: errStore, Now: now}
	first := Build(oldStatus(), in)
	in.Now = now.Add(30 * time.Second)
	retry := Build(first, in)
	if !reflect.DeepEqual(first.Conditions, retry.Conditions) {
		t.Errorf("conditions changed between retries:\n%+v\n%+v", first.Conditions, retry.Conditions)
	}
	in.Now = now.Add(DefaultStoreStallAfter)
	stalled := Build(retry, in)
	if s := meta.FindStatusCondition(stalled.Conditions, v1beta1.ConditionStalled); s == nil || s.Reason != v1beta1.ReasonStoreUnreachable {
		t.Errorf("Stalled = %+v after %s of outage", s, DefaultStoreStallAfter)
	}
}
