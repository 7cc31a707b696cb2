package regstatus

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/store"
)

const (
	owner     = "reg-uid"
	storeName = "etcd://etcd-0:2379"
	gen       = int64(7)
	oldGen    = int64(4)
)

var (
	t0  = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	now = time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)

	errStore = errors.New("context deadline exceeded")
)

// Verdicts as eligibility.Classify (or the reconciler, for the missing port) gives them.
var (
	vEligible    = eligibility.Verdict{State: v1beta1.EndpointRegistered, Reason: v1beta1.ReasonContainersReady}
	vUnready     = eligibility.Verdict{State: v1beta1.EndpointUnready, Reason: v1beta1.ReasonContainersNotReady}
	vDraining    = eligibility.Verdict{State: v1beta1.EndpointDraining, Reason: v1beta1.ReasonPodTerminating}
	vNotRunning  = eligibility.Verdict{State: v1beta1.EndpointPending, Reason: v1beta1.ReasonPodNotRunning}
	vNoIP        = eligibility.Verdict{State: v1beta1.EndpointPending, Reason: v1beta1.ReasonNoPodIP}
	vWarming     = eligibility.Verdict{State: v1beta1.EndpointWarmingUp, Reason: "WarmupInProgress"}
	vPortMissing = eligibility.Verdict{State: v1beta1.EndpointPending, Reason: v1beta1.ReasonNamedPortMissing}
)

// pod is a selected pod with UID "uid-<name>" and the given IP.
func pod(name, ip string, v eligibility.Verdict) Pod {
	return Pod{Name: name, UID: "uid-" + name, IP: ip, Verdict: v}
}

// rec is the record the registry wrote for p.
func rec(p Pod) store.Record {
	return store.Record{
		Endpoint: store.Endpoint{
			Service: "web", Namespace: "shop", Pod: p.Name, UID: p.UID, Address: p.IP,
			Ports: map[string]int32{"http": 8080}, Owner: owner, RegisteredAt: t0,
		},
		Key:      "/registrar/shop/web/" + p.Name,
		Revision: 1,
	}
}

// stored is a Stored map holding a record for each of pods.
func stored(pods ...Pod) map[string]store.Record {
	m := make(map[string]store.Record, len(pods))
	for _, p := range pods {
		m[p.Name] = rec(p)
	}
	return m
}

// ep is the EndpointStatus expected for p in state/reason since the given time.
func ep(p Pod, state v1beta1.EndpointState, reason string, since time.Time) v1beta1.EndpointStatus {
	return v1beta1.EndpointStatus{Pod: p.Name, UID: p.UID, IP: p.IP, State: state, Reason: reason, Since: ptr.To(metav1.NewTime(since))}
}

func cond(typ string, status metav1.ConditionStatus, reason, msg string, og int64, ltt time.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: og, LastTransitionTime: metav1.NewTime(ltt)}
}

func findCond(t *testing.T, st v1beta1.ServiceRegistryStatus, typ string) metav1.Condition {
	t.Helper()
	var found []metav1.Condition
	for _, c := range st.Conditions {
		if c.Type == typ {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s condition, got %d in %+v", typ, len(found), st.Conditions)
	}
	return found[0]
}

// condWant is what a test expects of one condition; empty fields are not checked.
type condWant struct {
	status   metav1.ConditionStatus
	reason   string
	contains []string // substrings the message must contain
	excludes []string // substrings the message must not contain
}

func checkCond(t *testing.T, st v1beta1.ServiceRegistryStatus, typ string, want condWant) {
	t.Helper()
	c := findCond(t, st, typ)
	if want.status != "" && c.Status != want.status {
		t.Errorf("%s status = %s, want %s (reason %s, message %q)", typ, c.Status, want.status, c.Reason, c.Message)
	}
	if want.reason != "" && c.Reason != want.reason {
		t.Errorf("%s reason = %s, want %s (message %q)", typ, c.Reason, want.reason, c.Message)
	}
	for _, s := range want.contains {
		if !strings.Contains(c.Message, s) {
			t.Errorf("%s message %q does not contain %q", typ, c.Message, s)
		}
	}
	for _, s := range want.excludes {
		if strings.Contains(c.Message, s) {
			t.Errorf("%s message %q contains %q", typ, c.Message, s)
		}
	}
}

func checkEndpoints(t *testing.T, got, want []v1beta1.EndpointStatus) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d endpoints, want %d:\n got  %+v\n want %+v", len(got), len(want), got, want)
		return
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("endpoint[%d]:\n got  %+v\n want %+v", i, got[i], want[i])
		}
	}
}

type counts struct{ desired, registered, warming, draining int32 }

func countsOf(st v1beta1.ServiceRegistryStatus) counts {
	return counts{st.Desired, st.Registered, st.Warming, st.Draining}
}

// oldStatus is a status a previous reconcile of generation oldGen wrote: web-a registered,
// web-b pending, both conditions True since t0.
func oldStatus() v1beta1.ServiceRegistryStatus {
	a := pod("web-a", "10.0.0.1", vEligible)
	b := pod("web-b", "10.0.0.2", vEligible)
	return v1beta1.ServiceRegistryStatus{
		ObservedGeneration: oldGen,
		Conditions: []metav1.Condition{
			cond(v1beta1.ConditionReady, metav1.ConditionTrue, v1beta1.ReasonAllRegistered, "1 of 2 selected pods are eligible and registered", oldGen, t0),
			cond(v1beta1.ConditionStoreSynced, metav1.ConditionTrue, v1beta1.ReasonSynced, "1 endpoints match", oldGen, t0),
		},
		ServiceName: "old-web",
		Desired:     2,
		Registered:  1,
		Endpoints: []v1beta1.EndpointStatus{
			ep(a, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0),
			ep(b, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, t0),
		},
	}
}

func TestBuildSelectorError(t *testing.T) {
	selErr := errors.New(`"in" operator requires values`)
	pods := []Pod{pod("web-a", "10.0.0.1", vEligible), pod("web-c", "10.0.0.3", vEligible)}
	tests := []struct {
		name    string
		old     v1beta1.ServiceRegistryStatus
		in      Input
		wantLTT time.Time // of the Ready condition
	}{
		{
			name:    "first reconcile",
			old:     v1beta1.ServiceRegistryStatus{},
			in:      Input{Generation: 1, ServiceName: "web", SelectorErr: selErr, StoreName: storeName, Now: now},
			wantLTT: now,
		},
		{
			name: "previously synced registry",
			old:  oldStatus(),
			in: Input{Generation: gen, ServiceName: "web", Pods: pods, Stored: stored(pods...),
				SelectorErr: selErr, StoreName: storeName, Now: now},
			wantLTT: now, // Ready went True -> False
		},
		{
			name: "selector still invalid",
			old: func() v1beta1.ServiceRegistryStatus {
				st := oldStatus()
				st.Conditions[0] = cond(v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonInvalidSelector, "old error", oldGen, t0)
				st.Endpoints = nil
				return st
			}(),
			in:      Input{Generation: gen, ServiceName: "web", SelectorErr: selErr, StoreName: storeName, Now: now},
			wantLTT: t0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(tt.old, tt.in)

			checkCond(t, got, v1beta1.ConditionReady, condWant{
				status: metav1.ConditionFalse, reason: v1beta1.ReasonInvalidSelector, contains: []string{selErr.Error()},
			})
			ready := findCond(t, got, v1beta1.ConditionReady)
			if ready.ObservedGeneration != tt.in.Generation {
				t.Errorf("Ready observedGeneration = %d, want %d", ready.ObservedGeneration, tt.in.Generation)
			}
			if !ready.LastTransitionTime.Time.Equal(tt.wantLTT) {
				t.Errorf("Ready lastTransitionTime = %v, want %v", ready.LastTransitionTime, tt.wantLTT)
			}
			if got.ServiceName != tt.old.ServiceName {
				t.Errorf("serviceName = %q, want the old %q", got.ServiceName, tt.old.ServiceName)
			}
			if len(got.Endpoints) != 0 {
				t.Errorf("endpoints = %+v, want none", got.Endpoints)
			}
			if got.ObservedGeneration != tt.in.Generation {
				t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, tt.in.Generation)
			}
			// With an invalid selector the registry keeps only still-eligible endpoints
			// (issue 13 hole 8): registered counts what the store holds when it was read.
			wantRegistered := tt.old.Registered
			if tt.in.Stored != nil {
				wantRegistered = int32(len(tt.in.Stored))
			}
			if got.Registered != wantRegistered {
				t.Errorf("registered = %d, want %d", got.Registered, wantRegistered)
			}
			// Nothing was read or written: StoreSynced is left as it was.
			for _, c := range tt.old.Conditions {
				if c.Type == v1beta1.ConditionStoreSynced {
					if s := findCond(t, got, v1beta1.ConditionStoreSynced); !reflect.DeepEqual(s, c) {
						t.Errorf("StoreSynced = %+v, want unchanged %+v", s, c)
					}
				}
			}
		})
	}
}

func TestBuildEndpointStates(t *testing.T) {
	a := pod("web-a", "10.0.0.1", vEligible)
	b := pod("web-b", "10.0.0.2", vEligible)
	c := pod("web-c", "10.0.0.3", vEligible)
	unready := pod("web-unready", "10.0.1.1", vUnready)
	draining := pod("web-draining", "10.0.1.2", vDraining)
	notRunning := pod("web-notrunning", "", vNotRunning)
	noIP := pod("web-noip", "", vNoIP)
	warming := pod("web-warming", "10.0.1.3", vWarming)
	noPort := pod("web-noport", "10.0.1.4", vPortMissing)

	otherUID := rec(b)
	otherUID.UID = "uid-web-b-previous"
	otherAddr := rec(c)
	otherAddr.Address = "10.9.9.9"

	tests := []struct {
		name   string
		pods   []Pod
		stored map[string]store.Record
		confl  []string
		want   []v1beta1.EndpointStatus
		counts counts
	}{
		{
			name:   "all eligible pods stored",
			pods:   []Pod{a, b, c},
			stored: stored(a, b, c),
			want: []v1beta1.EndpointStatus{
				ep(a, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, now),
				ep(b, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, now),
				ep(c, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, now),
			},
			counts: counts{desired: 3, registered: 3},
		},
		{
			name:   "no pods, empty store",
			stored: map[string]store.Record{},
			counts: counts{},
		},
		{
			name:   "ineligible pods keep their verdict",
			pods:   []Pod{a, unready, draining, notRunning, noIP, warming},
			stored: stored(a, draining), // a draining pod's record may not be gone yet
			want: []v1beta1.EndpointStatus{
				ep(a, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, now),
				ep(draining, v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating, now),
				ep(noIP, v1beta1.EndpointPending, v1beta1.ReasonNoPodIP, now),
				ep(notRunning, v1beta1.EndpointPending, v1beta1.ReasonPodNotRunning, now),
				ep(unready, v1beta1.EndpointUnready, v1beta1.ReasonContainersNotReady, now),
				ep(warming, v1beta1.EndpointWarmingUp, "WarmupInProgress", now),
			},
			counts: counts{desired: 1, registered: 2, warming: 1, draining: 1},
		},
		{
			name:   "eligible but not stored",
			pods:   []Pod{a, b},
			stored: stored(a),
			want: []v1beta1.EndpointStatus{
				ep(a, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, now),
				ep(b, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
			},
			counts: counts{desired: 2, registered: 1},
		},
		{
			name:   "stored for another UID or another address",
			pods:   []Pod{a, b, c},
			stored: map[string]store.Record{a.Name: rec(a), b.Name: otherUID, c.Name: otherAddr},
			want: []v1beta1.EndpointStatus{
				ep(a, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, now),
				ep(b, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
				ep(c, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
			},
			counts: counts{desired: 3, registered: 3},
		},
		{
			name:   "key conflict",
			pods:   []Pod{a, b},
			stored: stored(a),
			confl:  []string{b.Name},
			want: []v1beta1.EndpointStatus{
				ep(a, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, now),
				ep(b, v1beta1.EndpointPending, v1beta1.ReasonKeyConflict, now),
			},
			counts: counts{desired: 2, registered: 1},
		},
		{
			name:   "conflict wins over a stored record",
			pods:   []Pod{a},
			stored: stored(a),
			confl:  []string{a.Name},
			want:   []v1beta1.EndpointStatus{ep(a, v1beta1.EndpointPending, v1beta1.ReasonKeyConflict, now)},
			counts: counts{desired: 1, registered: 1},
		},
		{
			name:   "conflict on an ineligible pod keeps its verdict",
			pods:   []Pod{draining},
			stored: stored(),
			confl:  []string{draining.Name},
			want:   []v1beta1.EndpointStatus{ep(draining, v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating, now)},
			counts: counts{draining: 1},
		},
		{
			name:   "named port missing",
			pods:   []Pod{a, noPort},
			stored: stored(a),
			want: []v1beta1.EndpointStatus{
				ep(a, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, now),
				ep(noPort, v1beta1.EndpointPending, v1beta1.ReasonNamedPortMissing, now),
			},
			counts: counts{desired: 1, registered: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(v1beta1.ServiceRegistryStatus{}, Input{
				Generation: gen, ServiceName: "web", Pods: tt.pods, Stored: tt.stored,
				Conflicts: tt.confl, StoreName: storeName, Now: now,
			})
			checkEndpoints(t, got.Endpoints, tt.want)
			if c := countsOf(got); c != tt.counts {
				t.Errorf("counts = %+v, want %+v", c, tt.counts)
			}
			if got.ServiceName != "web" {
				t.Errorf("serviceName = %q, want web", got.ServiceName)
			}
			if got.ObservedGeneration != gen {
				t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, gen)
			}
		})
	}
}

func TestBuildConditions(t *testing.T) {
	a := pod("web-a", "10.0.0.1", vEligible)
	b := pod("web-b", "10.0.0.2", vEligible)
	noPort := pod("web-noport", "10.0.1.4", vPortMissing)
	var many []Pod
	var manyNames []string
	for i := range 7 {
		p := pod(fmt.Sprintf("web-%d", i), fmt.Sprintf("10.0.2.%d", i), vEligible)
		many = append(many, p)
		manyNames = append(manyNames, p.Name)
	}
	var manyNoPort []Pod
	for i := range 8 {
		manyNoPort = append(manyNoPort, pod(fmt.Sprintf("web-np-%d", i), fmt.Sprintf("10.0.3.%d", i), vPortMissing))
	}
	// Unsorted on purpose: the message lists the missing pods by name.
	manyNoPort[0], manyNoPort[7] = manyNoPort[7], manyNoPort[0]

	refused := pod("web-refused", "10.0.4.2", eligibility.Verdict{State: v1beta1.EndpointPending, Reason: v1beta1.ReasonServiceNameOwnedElsewhere})
	overlapped := pod("web-shared", "10.0.4.1", eligibility.Verdict{State: v1beta1.EndpointPending, Reason: v1beta1.ReasonSelectorOverlap})
	synced := condWant{status: metav1.ConditionTrue, reason: v1beta1.ReasonSynced, contains: []string{storeName}}
	unreachable := condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonStoreUnreachable, contains: []string{errStore.Error(), storeName}}
	notSynced := condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonStoreNotSynced}

	tests := []struct {
		name           string
		old            v1beta1.ServiceRegistryStatus
		in             Input
		ready, synced  condWant
		wantRegistered int32
	}{
		{
			name:           "all registered",
			in:             Input{Pods: []Pod{a, b}, Stored: stored(a, b)},
			ready:          condWant{status: metav1.ConditionTrue, reason: v1beta1.ReasonAllRegistered, contains: []string{"2 of 2"}},
			synced:         synced,
			wantRegistered: 2,
		},
		{
			name:           "all registered over an older status",
			old:            oldStatus(),
			in:             Input{Pods: []Pod{a, b}, Stored: stored(a, b)},
			ready:          condWant{status: metav1.ConditionTrue, reason: v1beta1.ReasonAllRegistered, contains: []string{"2 of 2"}},
			synced:         synced,
			wantRegistered: 2,
		},
		{
			name:           "an eligible pod is not in the store",
			in:             Input{Pods: []Pod{a, b}, Stored: stored(a)},
			ready:          condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonNotInStore, contains: []string{"1 eligible pods"}},
			synced:         synced,
			wantRegistered: 1,
		},
		{
			name:           "key conflict",
			in:             Input{Pods: []Pod{a, b}, Stored: stored(a), Conflicts: []string{b.Name}},
			ready:          condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonKeyConflict, contains: []string{b.Name}, excludes: []string{"more"}},
			synced:         synced,
			wantRegistered: 1,
		},
		{
			name:           "five conflicts are all named",
			in:             Input{Pods: many[:5], Stored: stored(), Conflicts: manyNames[:5]},
			ready:          condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonKeyConflict, contains: manyNames[:5], excludes: []string{"more"}},
			synced:         synced,
			wantRegistered: 0,
		},
		{
			name: "more than five conflicts",
			in:   Input{Pods: many, Stored: stored(), Conflicts: manyNames},
			ready: condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonKeyConflict,
				contains: append(slices.Clone(manyNames[:5]), "and 2 more"), excludes: manyNames[5:]},
			synced:         synced,
			wantRegistered: 0,
		},
		{
			name: "service name owned by another namespace: nothing published, the leftover record counted",
			in: Input{Pods: []Pod{refused}, Stored: stored(a), Overlaps: map[string]string{overlapped.Name: "web-stable"},
				Refused: "service name \"web\" belongs to namespace ns-a"},
			ready:          condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonServiceNameOwnedElsewhere, contains: []string{"ns-a"}},
			synced:         synced,
			wantRegistered: 1,
		},
		{
			name: "selector overlaps an older registry",
			in: Input{ServiceName: "web", Pods: []Pod{a, overlapped}, Stored: stored(a),
				Overlaps: map[string]string{overlapped.Name: "web-stable"}},
			ready: condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonSelectorOverlap,
				contains: []string{overlapped.Name, "older ServiceRegistry web-stable", `service "web"`, "writes nothing"}},
			synced:         synced,
			wantRegistered: 1,
		},
		{
			name: "an overlap is reported before a key conflict",
			in: Input{Pods: []Pod{a, b, overlapped}, Stored: stored(a), Conflicts: []string{b.Name},
				Overlaps: map[string]string{overlapped.Name: "web-stable"}},
			ready:          condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonSelectorOverlap, contains: []string{"web-stable"}},
			synced:         synced,
			wantRegistered: 1,
		},
		{
			name:           "named port missing",
			in:             Input{Pods: []Pod{a, noPort}, Stored: stored(a)},
			ready:          condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonNamedPortMissing, contains: []string{noPort.Name}},
			synced:         synced,
			wantRegistered: 1,
		},
		{
			name: "named port missing on many pods",
			in:   Input{Pods: manyNoPort, Stored: stored()},
			ready: condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonNamedPortMissing,
				contains: []string{"web-np-0, web-np-1, web-np-2, web-np-3, web-np-4", "and 3 more"},
				excludes: []string{"web-np-5", "web-np-6", "web-np-7"}},
			synced:         synced,
			wantRegistered: 0,
		},
		{
			name:           "conflict reported before missing port",
			in:             Input{Pods: []Pod{a, noPort}, Stored: stored(), Conflicts: []string{a.Name}},
			ready:          condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonKeyConflict, contains: []string{a.Name}, excludes: []string{noPort.Name}},
			synced:         synced,
			wantRegistered: 0,
		},
		{
			name:           "store unreadable",
			old:            oldStatus(),
			in:             Input{Pods: []Pod{a, b}, Stored: nil, StoreErr: errStore},
			ready:          notSynced,
			synced:         unreachable,
			wantRegistered: oldStatus().Registered,
		},
		{
			name:           "store unreadable on first reconcile",
			in:             Input{Pods: []Pod{a, b}, Stored: nil, StoreErr: errStore},
			ready:          notSynced,
			synced:         unreachable,
			wantRegistered: 0,
		},
		{
			name:           "write failed after a successful list",
			old:            oldStatus(),
			in:             Input{Pods: []Pod{a, b}, Stored: stored(a, b), StoreErr: errStore},
			ready:          notSynced,
			synced:         unreachable,
			wantRegistered: 2,
		},
		{
			name:           "write failed after listing an empty store",
			old:            oldStatus(),
			in:             Input{Pods: []Pod{a, b}, Stored: map[string]store.Record{}, StoreErr: errStore},
			ready:          notSynced,
			synced:         unreachable,
			wantRegistered: 0,
		},
		{
			name:  "cluster ID claimed by another installation",
			in:    Input{Pods: []Pod{a, b}, Stored: map[string]store.Record{}, StoreErr: fmt.Errorf("write: %w", store.ErrClusterClaimed)},
			ready: notSynced,
			synced: condWant{status: metav1.ConditionFalse, reason: v1beta1.ReasonClusterIdentityClash,
				contains: []string{"refusing to write", storeName}},
			wantRegistered: 0,
		},
		{
			name:           "store error reported before conflicts and missing ports",
			in:             Input{Pods: []Pod{a, noPort}, Stored: stored(), Conflicts: []string{a.Name}, StoreErr: errStore},
			ready:          notSynced,
			synced:         unreachable,
			wantRegistered: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Generation, in.ServiceName, in.StoreName, in.Now = gen, "web", storeName, now
			got := Build(tt.old, in)

			checkCond(t, got, v1beta1.ConditionReady, tt.ready)
			checkCond(t, got, v1beta1.ConditionStoreSynced, tt.synced)
			if n := len(baseConditions(got)); n != 3 {
				t.Errorf("got %d conditions besides Reconciling and Stalled, want Ready, StoreSynced and DrainSufficient: %+v", n, got.Conditions)
			}
			for _, c := range got.Conditions {
				if c.ObservedGeneration != gen {
					t.Errorf("%s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, gen)
				}
			}
			if got.ObservedGeneration != gen {
				t.Errorf("observedGeneration = %d, want %d: a status always describes the generation evaluated", got.ObservedGeneration, gen)
			}
			if got.Registered != tt.wantRegistered {
				t.Errorf("registered = %d, want %d", got.Registered, tt.wantRegistered)
			}
			if got.ServiceName != "web" {
				t.Errorf("serviceName = %q, want web", got.ServiceName)
			}
		})
	}
}

func TestBuildStoreUnreadableKeepsLastKnownEndpoints(t *testing.T) {
	kept := pod("web-kept", "10.0.0.1", vEligible)           // Registered before, same UID
	recreated := pod("web-recreated", "10.0.0.2", vEligible) // Registered before under another UID
	pending := pod("web-pending", "10.0.0.3", vEligible)     // Pending NotInStore before
	wasUnready := pod("web-wasunready", "10.0.0.4", vEligible)
	fresh := pod("web-fresh", "10.0.0.5", vEligible) // not in the old status
	nowDraining := pod("web-nowdraining", "10.0.0.6", vDraining)

	old := v1beta1.ServiceRegistryStatus{
		ObservedGeneration: oldGen,
		ServiceName:        "web",
		Desired:            5,
		Registered:         3,
		Endpoints: []v1beta1.EndpointStatus{
			ep(kept, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0),
			ep(nowDraining, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0),
			ep(pending, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, t0),
			{Pod: recreated.Name, UID: "uid-previous", IP: "10.0.9.9", State: v1beta1.EndpointRegistered,
				Reason: v1beta1.ReasonContainersReady, Since: ptr.To(metav1.NewTime(t0))},
			ep(wasUnready, v1beta1.EndpointUnready, v1beta1.ReasonContainersNotReady, t0),
		},
	}
	pods := []Pod{kept, recreated, pending, wasUnready, fresh, nowDraining}

	tests := []struct {
		name           string
		stored         map[string]store.Record
		want           []v1beta1.EndpointStatus
		wantRegistered int32
	}{
		{
			name:   "store unreadable",
			stored: nil,
			want: []v1beta1.EndpointStatus{
				ep(fresh, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
				ep(kept, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0),
				ep(nowDraining, v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating, now),
				ep(pending, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, t0),
				ep(recreated, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
				ep(wasUnready, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
			},
			wantRegistered: old.Registered,
		},
		{
			// The list succeeded, so it is the truth: no last-known shortcut.
			name:   "write failed after listing an empty store",
			stored: map[string]store.Record{},
			want: []v1beta1.EndpointStatus{
				ep(fresh, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
				ep(kept, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
				ep(nowDraining, v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating, now),
				ep(pending, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, t0),
				ep(recreated, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
				ep(wasUnready, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
			},
			wantRegistered: 0,
		},
		{
			name:   "write failed after listing some records",
			stored: stored(kept, pending),
			want: []v1beta1.EndpointStatus{
				ep(fresh, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
				ep(kept, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0),
				ep(nowDraining, v1beta1.EndpointDraining, v1beta1.ReasonPodTerminating, now),
				ep(pending, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, now),
				ep(recreated, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
				ep(wasUnready, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, now),
			},
			wantRegistered: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(old, Input{
				Generation: gen, ServiceName: "web", Pods: pods, Stored: tt.stored,
				StoreErr: errStore, StoreName: storeName, Now: now,
			})
			checkEndpoints(t, got.Endpoints, tt.want)
			if got.Registered != tt.wantRegistered {
				t.Errorf("registered = %d, want %d", got.Registered, tt.wantRegistered)
			}
			if got.Desired != 5 || got.Draining != 1 {
				t.Errorf("desired, draining = %d, %d, want 5, 1", got.Desired, got.Draining)
			}
			if got.ObservedGeneration != gen {
				t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, gen)
			}
		})
	}
}

func TestBuildSince(t *testing.T) {
	p := pod("web-a", "10.0.0.1", vEligible)
	tests := []struct {
		name  string
		old   []v1beta1.EndpointStatus
		pod   Pod
		sto   map[string]store.Record
		confl []string
		want  time.Time
	}{
		{
			name: "same pod, same state",
			old:  []v1beta1.EndpointStatus{ep(p, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0)},
			pod:  p, sto: stored(p),
			want: t0,
		},
		{
			name: "same pod, still pending",
			old:  []v1beta1.EndpointStatus{ep(p, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, t0)},
			pod:  p, sto: stored(),
			want: t0,
		},
		{
			name: "same state, another reason",
			old:  []v1beta1.EndpointStatus{ep(p, v1beta1.EndpointPending, v1beta1.ReasonPodNotRunning, t0)},
			pod:  pod(p.Name, "", vNoIP), sto: stored(),
			want: t0,
		},
		{
			name: "same state, new IP",
			old:  []v1beta1.EndpointStatus{ep(pod(p.Name, "10.0.9.9", vEligible), v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0)},
			pod:  p, sto: stored(p),
			want: t0,
		},
		{
			name: "pending to registered",
			old:  []v1beta1.EndpointStatus{ep(p, v1beta1.EndpointPending, v1beta1.ReasonNotInStore, t0)},
			pod:  p, sto: stored(p),
			want: now,
		},
		{
			name: "registered to draining",
			old:  []v1beta1.EndpointStatus{ep(p, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0)},
			pod:  pod(p.Name, p.IP, vDraining), sto: stored(p),
			want: now,
		},
		{
			name: "registered to key conflict",
			old:  []v1beta1.EndpointStatus{ep(p, v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0)},
			pod:  p, sto: stored(), confl: []string{p.Name},
			want: now,
		},
		{
			name: "same state, pod recreated under a new UID",
			old: []v1beta1.EndpointStatus{{Pod: p.Name, UID: "uid-previous", IP: p.IP, State: v1beta1.EndpointRegistered,
				Reason: v1beta1.ReasonContainersReady, Since: ptr.To(metav1.NewTime(t0))}},
			pod: p, sto: stored(p),
			want: now,
		},
		{
			name: "new pod",
			old:  []v1beta1.EndpointStatus{ep(pod("web-other", "10.0.0.2", vEligible), v1beta1.EndpointRegistered, v1beta1.ReasonContainersReady, t0)},
			pod:  p, sto: stored(p),
			want: now,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(v1beta1.ServiceRegistryStatus{Endpoints: tt.old}, Input{
				Generation: gen, ServiceName: "web", Pods: []Pod{tt.pod}, Stored: tt.sto,
				Conflicts: tt.confl, StoreName: storeName, Now: now,
			})
			if len(got.Endpoints) != 1 {
				t.Fatalf("got %d endpoints, want 1: %+v", len(got.Endpoints), got.Endpoints)
			}
			if e := got.Endpoints[0]; !e.Since.Time.Equal(tt.want) {
				t.Errorf("since = %v, want %v (state %s, reason %s)", e.Since, tt.want, e.State, e.Reason)
			}
		})
	}
}

func TestBuildConditionTransitionTime(t *testing.T) {
	a := pod("web-a", "10.0.0.1", vEligible)
	b := pod("web-b", "10.0.0.2", vEligible)
	withConds := func(conds ...metav1.Condition) v1beta1.ServiceRegistryStatus {
		return v1beta1.ServiceRegistryStatus{ObservedGeneration: oldGen, ServiceName: "web", Conditions: conds}
	}
	readyTrue := cond(v1beta1.ConditionReady, metav1.ConditionTrue, v1beta1.ReasonAllRegistered, "1 of 1 selected pods are eligible and registered", oldGen, t0)
	readyConflict := cond(v1beta1.ConditionReady, metav1.ConditionFalse, v1beta1.ReasonKeyConflict, "conflict", oldGen, t0)
	syncedTrue := cond(v1beta1.ConditionStoreSynced, metav1.ConditionTrue, v1beta1.ReasonSynced, "1 endpoints", oldGen, t0)
	syncedFalse := cond(v1beta1.ConditionStoreSynced, metav1.ConditionFalse, v1beta1.ReasonStoreUnreachable, "old error", oldGen, t0)

	tests := []struct {
		name                string
		old                 v1beta1.ServiceRegistryStatus
		in                  Input
		wantReady, wantSync time.Time
	}{
		{
			name:      "no previous conditions",
			old:       v1beta1.ServiceRegistryStatus{},
			in:        Input{Pods: []Pod{a}, Stored: stored(a)},
			wantReady: now, wantSync: now,
		},
		{
			name:      "unchanged",
			old:       withConds(readyTrue, syncedTrue),
			in:        Input{Pods: []Pod{a}, Stored: stored(a)},
			wantReady: t0, wantSync: t0,
		},
		{
			name:      "same status, new message",
			old:       withConds(readyTrue, syncedTrue),
			in:        Input{Pods: []Pod{a, b}, Stored: stored(a, b)},
			wantReady: t0, wantSync: t0,
		},
		{
			name:      "same status, new reason",
			old:       withConds(readyConflict, syncedFalse),
			in:        Input{Pods: []Pod{a}, Stored: nil, StoreErr: errStore},
			wantReady: t0, wantSync: t0,
		},
		{
			name:      "store became unreachable",
			old:       withConds(readyTrue, syncedTrue),
			in:        Input{Pods: []Pod{a}, Stored: nil, StoreErr: errStore},
			wantReady: now, wantSync: now,
		},
		{
			name:      "store recovered",
			old:       withConds(readyConflict, syncedFalse),
			in:        Input{Pods: []Pod{a}, Stored: stored(a)},
			wantReady: now, wantSync: now,
		},
		{
			name:      "conflict appeared while the store stays synced",
			old:       withConds(readyTrue, syncedTrue),
			in:        Input{Pods: []Pod{a, b}, Stored: stored(a), Conflicts: []string{b.Name}},
			wantReady: now, wantSync: t0,
		},
		{
			name:      "only StoreSynced known before",
			old:       withConds(syncedTrue),
			in:        Input{Pods: []Pod{a}, Stored: stored(a)},
			wantReady: now, wantSync: t0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Generation, in.ServiceName, in.StoreName, in.Now = gen, "web", storeName, now
			got := Build(tt.old, in)
			for typ, want := range map[string]time.Time{v1beta1.ConditionReady: tt.wantReady, v1beta1.ConditionStoreSynced: tt.wantSync} {
				c := findCond(t, got, typ)
				if !c.LastTransitionTime.Time.Equal(want) {
					t.Errorf("%s lastTransitionTime = %v, want %v (status %s, reason %s)", typ, c.LastTransitionTime, want, c.Status, c.Reason)
				}
				if c.ObservedGeneration != gen {
					t.Errorf("%s observedGeneration = %d, want %d", typ, c.ObservedGeneration, gen)
				}
			}
		})
	}
}

func TestBuildEndpointsSortedAndCapped(t *testing.T) {
	name := func(i int) string { return fmt.Sprintf("web-%04d", i) }
	ip := func(i int) string { return fmt.Sprintf("10.1.%d.%d", i/256, i%256) }

	// n pods in reverse name order; the last `tail` pods by name get verdict v.
	build := func(n, tail int, v eligibility.Verdict) (pods []Pod, eligible []Pod) {
		for i := n - 1; i >= 0; i-- {
			p := pod(name(i), ip(i), vEligible)
			if i >= n-tail {
				p.Verdict = v
			} else {
				eligible = append(eligible, p)
			}
			pods = append(pods, p)
		}
		return pods, eligible
	}
	smallPods := []Pod{
		pod("web-c", "10.0.0.3", vEligible),
		pod("web-a", "10.0.0.1", vUnready),
		pod("web-b", "10.0.0.2", vEligible),
	}
	n := MaxEndpoints + 10
	allPods, allEligible := build(n, 0, vEligible)
	drainingTail, drainingTailEligible := build(n, 10, vDraining)
	warmingTail, warmingTailEligible := build(n, 10, vWarming)

	tests := []struct {
		name      string
		pods      []Pod
		stored    map[string]store.Record
		wantNames []string
		counts    counts
	}{
		{
			name:      "small, unsorted input",
			pods:      smallPods,
			stored:    stored(smallPods[0], smallPods[2]),
			wantNames: []string{"web-a", "web-b", "web-c"},
			counts:    counts{desired: 2, registered: 2},
		},
		{
			name:      "exactly MaxEndpoints",
			pods:      allPods[10:],
			stored:    stored(allPods[10:]...),
			wantNames: names(MaxEndpoints, name),
			counts:    counts{desired: MaxEndpoints, registered: MaxEndpoints},
		},
		{
			name:      "MaxEndpoints+10, all registered",
			pods:      allPods,
			stored:    stored(allEligible...),
			wantNames: names(MaxEndpoints, name),
			counts:    counts{desired: int32(n), registered: int32(n)},
		},
		{
			name:      "MaxEndpoints+10, draining pods beyond the cap are counted",
			pods:      drainingTail,
			stored:    stored(drainingTailEligible...),
			wantNames: names(MaxEndpoints, name),
			counts:    counts{desired: int32(n - 10), registered: int32(n - 10), draining: 10},
		},
		{
			name:      "MaxEndpoints+10, warming pods beyond the cap are counted",
			pods:      warmingTail,
			stored:    stored(warmingTailEligible...),
			wantNames: names(MaxEndpoints, name),
			counts:    counts{desired: int32(n - 10), registered: int32(n - 10), warming: 10},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := slices.Clone(tt.pods)
			got := Build(v1beta1.ServiceRegistryStatus{}, Input{
				Generation: gen, ServiceName: "web", Pods: tt.pods, Stored: tt.stored, StoreName: storeName, Now: now,
			})
			var gotNames []string
			for _, e := range got.Endpoints {
				gotNames = append(gotNames, e.Pod)
			}
			if !slices.Equal(gotNames, tt.wantNames) {
				t.Errorf("endpoints (%d) = %v...,\nwant (%d) %v...", len(gotNames), head(gotNames), len(tt.wantNames), head(tt.wantNames))
			}
			if len(got.Endpoints) > MaxEndpoints {
				t.Errorf("got %d endpoints, more than MaxEndpoints %d", len(got.Endpoints), MaxEndpoints)
			}
			if c := countsOf(got); c != tt.counts {
				t.Errorf("counts = %+v, want %+v", c, tt.counts)
			}
			if !reflect.DeepEqual(tt.pods, pods) {
				t.Errorf("Build reordered or changed in.Pods")
			}
		})
	}
}

func names(n int, name func(int) string) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = name(i)
	}
	return s
}

func head(s []string) []string { return s[:min(len(s), 5)] }

func TestBuildDoesNotMutateOld(t *testing.T) {
	a := pod("web-a", "10.0.0.1", vEligible)
	b := pod("web-b", "10.0.0.2", vDraining)
	c := pod("web-c", "10.0.0.3", vEligible)
	tests := []struct {
		name string
		in   Input
	}{
		{name: "all registered", in: Input{Pods: []Pod{c, b, a}, Stored: stored(a, c)}},
		{name: "store unreadable", in: Input{Pods: []Pod{c, b, a}, Stored: nil, StoreErr: errStore}},
		{name: "write failed", in: Input{Pods: []Pod{a, c}, Stored: stored(a), StoreErr: errStore}},
		{name: "conflicts", in: Input{Pods: []Pod{a, c}, Stored: stored(a), Conflicts: []string{c.Name}}},
		{name: "selector error", in: Input{SelectorErr: errors.New("bad selector")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := oldStatus()
			// Spare capacity would let an append write into old's backing arrays.
			old.Conditions = slices.Grow(old.Conditions, 4)
			old.Endpoints = slices.Grow(old.Endpoints, 4)
			before := *old.DeepCopy()

			in := tt.in
			in.Generation, in.ServiceName, in.StoreName, in.Now = gen, "web", storeName, now
			got := Build(old, in)
			if !reflect.DeepEqual(old, before) {
				t.Fatalf("Build mutated old:\n got  %+v\n want %+v", old, before)
			}

			// The result must not share memory with old either.
			for i := range got.Conditions {
				got.Conditions[i].Message = "changed"
				got.Conditions[i].LastTransitionTime = metav1.NewTime(now.Add(time.Hour))
			}
			for i := range got.Endpoints {
				got.Endpoints[i].State = v1beta1.EndpointUnready
				got.Endpoints[i].Since = ptr.To(metav1.NewTime(now.Add(time.Hour)))
			}
			if !reflect.DeepEqual(old, before) {
				t.Fatalf("the result of Build aliases old:\n got  %+v\n want %+v", old, before)
			}
		})
	}
}

func TestBuildDrainAdvice(t *testing.T) {
	tests := []struct {
		name            string
		drain           Drain
		wantStatus      metav1.ConditionStatus
		wantReason      string
		wantRecommended int32
		wantLagMillis   int64
		wantPushMillis  int64
	}{
		{"drain covers cache and lag", Drain{Seconds: 15, CallerCacheSeconds: 5, DeregistrationLag: 40 * time.Millisecond},
			metav1.ConditionTrue, v1beta1.ReasonDrainCoversCallers, 6, 40, 0},
		{"lag rounds the recommendation up", Drain{Seconds: 5, CallerCacheSeconds: 5, DeregistrationLag: 1200 * time.Millisecond},
			metav1.ConditionFalse, v1beta1.ReasonDrainTooShort, 7, 1200, 0},
		{"exactly enough", Drain{Seconds: 5, CallerCacheSeconds: 5}, metav1.ConditionTrue, v1beta1.ReasonDrainCoversCallers, 5, 0, 0},
		{"no drain at all", Drain{Seconds: 0, CallerCacheSeconds: 30, DeregistrationLag: time.Millisecond},
			metav1.ConditionFalse, v1beta1.ReasonDrainTooShort, 30, 0, 0},
		{"xDS push lag within the callers' cache: the cache decides", Drain{Seconds: 6, CallerCacheSeconds: 5, DeregistrationLag: 40 * time.Millisecond, XDSPushLag: 900 * time.Millisecond},
			metav1.ConditionTrue, v1beta1.ReasonDrainCoversCallers, 6, 40, 900},
		{"a quick xDS push is still shown as measured", Drain{Seconds: 5, CallerCacheSeconds: 5, XDSPushLag: 400 * time.Microsecond},
			metav1.ConditionTrue, v1beta1.ReasonDrainCoversCallers, 5, 0, 1},
		{"xDS push lag beyond the callers' cache: it decides", Drain{Seconds: 2, CallerCacheSeconds: 0, DeregistrationLag: 300 * time.Millisecond, XDSPushLag: 2500 * time.Millisecond},
			metav1.ConditionFalse, v1beta1.ReasonDrainTooShort, 3, 300, 2500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(v1beta1.ServiceRegistryStatus{}, Input{Generation: gen, ServiceName: "web", Stored: map[string]store.Record{}, Drain: tt.drain, Now: now})
			c := findCond(t, got, v1beta1.ConditionDrainSufficient)
			if c.Status != tt.wantStatus || c.Reason != tt.wantReason {
				t.Errorf("DrainSufficient = %s/%s, want %s/%s", c.Status, c.Reason, tt.wantStatus, tt.wantReason)
			}
			if tt.wantStatus == metav1.ConditionFalse && !strings.Contains(c.Message, fmt.Sprintf("at least %d", tt.wantRecommended)) {
				t.Errorf("message %q does not tell the user the drain to set (%d)", c.Message, tt.wantRecommended)
			}
			want := v1beta1.DrainStatus{Seconds: tt.drain.Seconds, CallerCacheSeconds: tt.drain.CallerCacheSeconds,
				RecommendedSeconds: tt.wantRecommended}
			if tt.wantLagMillis > 0 { // unset while no lag was measured (or it rounded to 0)
				want.DeregistrationLagMillis = &tt.wantLagMillis
			}
			if tt.wantPushMillis > 0 {
				want.XDSPushLagMillis = &tt.wantPushMillis
			}
			if push := tt.drain.XDSPushLag; push > time.Duration(tt.drain.CallerCacheSeconds)*time.Second && !strings.Contains(c.Message, "xDS push lag "+push.String()) {
				t.Errorf("message %q does not name the xDS push lag that decided the advice", c.Message)
			}
			if got.Drain == nil || !reflect.DeepEqual(*got.Drain, want) {
				t.Errorf("drain = %+v, want %+v", got.Drain, want)
			}
		})
	}
}

func TestBuildConfigured(t *testing.T) {
	tests := []struct {
		name       string
		config     Configuration
		wantStatus metav1.ConditionStatus // "" = no condition
	}{
		{"hand-written registry has no Configured condition", Configuration{}, ""},
		{"generated with valid annotations", Configuration{Generated: true}, metav1.ConditionTrue},
		{"generated with a bad annotation", Configuration{Generated: true, Problems: `registrar.dev/drain-seconds: "abc"`}, metav1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(v1beta1.ServiceRegistryStatus{}, Input{Generation: gen, Stored: map[string]store.Record{}, Config: tt.config, Now: now})
			var c *metav1.Condition
			for i := range got.Conditions {
				if got.Conditions[i].Type == v1beta1.ConditionConfigured {
					c = &got.Conditions[i]
				}
			}
			switch {
			case tt.wantStatus == "" && c != nil:
				t.Errorf("unexpected Configured condition %+v", c)
			case tt.wantStatus != "" && (c == nil || c.Status != tt.wantStatus):
				t.Errorf("Configured = %+v, want status %s", c, tt.wantStatus)
			case tt.wantStatus == metav1.ConditionFalse && !strings.Contains(c.Message, tt.config.Problems):
				t.Errorf("Configured message %q does not carry the problem", c.Message)
			}
		})
	}
}
