package leaseguard

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

func TestAssess(t *testing.T) {
	cfg := DefaultConfig()
	for _, tc := range []struct {
		name string
		n    Counts
		want State
	}{
		{"nothing lapsed", Counts{Endpoints: 10, Nodes: 5}, Normal},
		{"one node of three lost, all its endpoints", Counts{Endpoints: 3, Lapsed: 3, Nodes: 1, LapsedNodes: 1}, Normal},
		{"two nodes lost: too few to be blindness", Counts{Endpoints: 4, Lapsed: 4, Nodes: 2, LapsedNodes: 2}, Normal},
		{"three of three nodes lapsed", Counts{Endpoints: 6, Lapsed: 6, Nodes: 3, LapsedNodes: 3}, Full},
		{"share at the threshold is not over it", Counts{Endpoints: 100, Lapsed: 55, Nodes: 10, LapsedNodes: 6}, Normal},
		{"share just over the threshold", Counts{Endpoints: 100, Lapsed: 56, Nodes: 10, LapsedNodes: 6}, Partial},
		{"many nodes lapsed but few endpoints on them", Counts{Endpoints: 100, Lapsed: 20, Nodes: 10, LapsedNodes: 5}, Normal},
		{"every node lapsed", Counts{Endpoints: 40, Lapsed: 40, Nodes: 8, LapsedNodes: 8}, Full},
		{"every node lapsed, pods without a node keep the share under", Counts{Endpoints: 100, Lapsed: 40, Nodes: 8, LapsedNodes: 8}, Normal},
		{"no endpoints", Counts{}, Normal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cfg.Assess(tc.n); got != tc.want {
				t.Errorf("Assess(%+v) = %s, want %s", tc.n, got, tc.want)
			}
		})
	}
	off := cfg
	off.Share = 1
	if got := off.Assess(Counts{Endpoints: 6, Lapsed: 6, Nodes: 3, LapsedNodes: 3}); got != Normal {
		t.Errorf("share 1 (disabled) assessed %s", got)
	}
}

func TestDecide(t *testing.T) {
	cfg := DefaultConfig()
	small := func(lapsedNodes int) Counts { // 10 nodes, 3 endpoints each
		return Counts{Endpoints: 30, Lapsed: 3 * lapsedNodes, Nodes: 10, LapsedNodes: lapsedNodes}
	}
	large := func(lapsedNodes int) Counts { // 100 nodes, 2 endpoints each
		return Counts{Endpoints: 200, Lapsed: 2 * lapsedNodes, Nodes: 100, LapsedNodes: lapsedNodes}
	}
	for _, tc := range []struct {
		name              string
		registry, cluster Counts
		hold              bool
		scope             Scope
		state             State
		trickle           bool
	}{
		{"one node lost", Counts{Endpoints: 3, Lapsed: 3, Nodes: 1, LapsedNodes: 1}, small(1), false, "", Normal, false},
		{"every node lapsed, small cluster", small(10), small(10), true, ScopeCluster, Full, false},
		{"every node lapsed, large cluster: never trickled", large(100), large(100), true, ScopeCluster, Full, false},
		{"most nodes lapsed, small cluster: held", small(7), small(7), true, ScopeCluster, Partial, false},
		{"most nodes lapsed, large cluster: trickled", large(80), large(80), true, ScopeCluster, Partial, true},
		{"registry's nodes lapsed, cluster fine", Counts{Endpoints: 4, Lapsed: 4, Nodes: 4, LapsedNodes: 4}, large(4), true, ScopeRegistry, Full, true},
		{"registry's nodes lapsed, small cluster fine", Counts{Endpoints: 4, Lapsed: 3, Nodes: 4, LapsedNodes: 3}, small(3), true, ScopeRegistry, Partial, false},
		{"registry on two lapsed nodes", Counts{Endpoints: 4, Lapsed: 4, Nodes: 2, LapsedNodes: 2}, small(2), false, "", Normal, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := cfg.Decide(tc.registry, tc.cluster)
			if d.Hold != tc.hold || (tc.hold && (d.Scope != tc.scope || d.State != tc.state || d.Trickle != tc.trickle)) {
				t.Errorf("Decide = %+v, want hold %v scope %q state %s trickle %v", d, tc.hold, tc.scope, tc.state, tc.trickle)
			}
			if d.Hold && !strings.Contains(d.Message(2), "2 endpoint(s) kept") {
				t.Errorf("message %q", d.Message(2))
			}
		})
	}
	noRate := cfg
	noRate.SecondaryRate = 0
	if d := noRate.Decide(large(80), large(80)); !d.Hold || d.Trickle {
		t.Errorf("secondary rate 0: %+v, want held without trickle", d)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{{Share: 0, MinNodes: 3}, {Share: 0.5, MinNodes: 0}, {Share: 0.5, MinNodes: 1, LargeClusterSize: -1}, {Share: 0.5, MinNodes: 1, SecondaryRate: -1}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestReleaser(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := NewReleaser()
	const rate = 0.1 // one node per 10 s
	steps := []struct {
		node string
		at   time.Duration
		want bool
	}{
		{"a", 0, true},                   // the first release is immediate
		{"b", time.Second, false},        // no token yet
		{"a", 2 * time.Second, true},     // a released node stays released
		{"b", 9 * time.Second, false},    // 0.9 token
		{"b", 10 * time.Second, true},    // one token after 10 s
		{"c", 10 * time.Second, false},   // spent
		{"c", 5 * time.Second, false},    // a clock going back adds nothing
		{"c", 20 * time.Second, true},    // next token
		{"d", 1000 * time.Second, true},  // tokens cap at one
		{"e", 1001 * time.Second, false}, // no second token from the long pause
	}
	for i, s := range steps {
		if got := r.Released(s.node, rate, t0.Add(s.at)); got != s.want {
			t.Fatalf("step %d: Released(%s, +%s) = %v, want %v", i, s.node, s.at, got, s.want)
		}
	}
	if got := fmt.Sprint(r.ReleasedNodes()); got != "[a b c d]" {
		t.Errorf("released %s", got)
	}
	r.Forget("a")
	if r.Released("a", 0, t0.Add(2000*time.Second)) {
		t.Error("a forgotten node was released at rate 0")
	}
}

func TestClusterCount(t *testing.T) {
	c := NewCluster[string]()
	c.Set("ns/a", Placement{"n1": 2, "n2": 1, "": 1})
	c.Set("ns/b", Placement{"n2": 3, "n3": 1})
	lapsed := func(node string) bool { return node == "n2" || node == "n3" }
	if got, want := c.Count(lapsed), (Counts{Endpoints: 8, Lapsed: 5, Nodes: 3, LapsedNodes: 2}); got != want {
		t.Errorf("Count = %+v, want %+v", got, want)
	}
	c.Set("ns/b", Placement{"n3": 1}) // b's pods left n2
	if got, want := c.Count(lapsed), (Counts{Endpoints: 5, Lapsed: 2, Nodes: 3, LapsedNodes: 2}); got != want {
		t.Errorf("after update Count = %+v, want %+v", got, want)
	}
	c.Set("ns/a", nil)
	c.Set("ns/b", nil)
	if got := c.Count(lapsed); got != (Counts{}) {
		t.Errorf("after forgetting every registry Count = %+v", got)
	}
	if got, want := (Placement{"n1": 2, "": 3}).Count(func(string) bool { return true }), (Counts{Endpoints: 5, Lapsed: 2, Nodes: 1, LapsedNodes: 1}); got != want {
		t.Errorf("Placement.Count = %+v, want %+v", got, want)
	}
}

// PlacementOf counts what the guard weighs: endpoints that pass every rule but the node
// Lease one, and those the node Lease rule took out (their nodes lapsed); not a pod's own
// status, nor any pod of a node the API server deleted.
func TestPlacementOf(t *testing.T) {
	registered := eligibility.Verdict{State: v1beta1.EndpointRegistered, Reason: v1beta1.ReasonContainersReady}
	warming := eligibility.Verdict{State: v1beta1.EndpointWarmingUp, Reason: v1beta1.ReasonWarmingUp}
	expired := eligibility.Verdict{State: v1beta1.EndpointPending, Reason: v1beta1.ReasonNodeLeaseExpired}
	notReady := eligibility.Verdict{State: v1beta1.EndpointPending, Reason: v1beta1.ReasonContainersNotReady}
	type pod struct {
		node    string
		verdict eligibility.Verdict
	}
	for _, tc := range []struct {
		name       string
		pods       []pod
		gone       string
		want       Placement
		wantLapsed map[string]bool
	}{
		{"no pods", nil, "", Placement{}, map[string]bool{}},
		{"registered and warming up count, not ready does not",
			[]pod{{"n1", registered}, {"n1", warming}, {"n2", notReady}, {"", registered}}, "",
			Placement{"n1": 2, "": 1}, map[string]bool{}},
		{"a lapsed node's pods count, and the node is lapsed",
			[]pod{{"n1", expired}, {"n1", expired}, {"n2", registered}}, "",
			Placement{"n1": 2, "n2": 1}, map[string]bool{"n1": true}},
		{"a node gone counts nowhere",
			[]pod{{"n1", expired}, {"n2", expired}, {"n2", registered}}, "n2",
			Placement{"n1": 1}, map[string]bool{"n1": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := func(yield func(*corev1.Pod, eligibility.Verdict) bool) {
				for _, p := range tc.pods {
					if !yield(&corev1.Pod{Spec: corev1.PodSpec{NodeName: p.node}}, p.verdict) {
						return
					}
				}
			}
			placement, lapsed := PlacementOf(pods, func(node string) bool { return node != "" && node == tc.gone })
			if !maps.Equal(placement, tc.want) || !maps.Equal(lapsed, tc.wantLapsed) {
				t.Errorf("PlacementOf = %v, lapsed %v; want %v, lapsed %v", placement, lapsed, tc.want, tc.wantLapsed)
			}
		})
	}
}

func TestLapsing(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	lease := eligibility.NodeLease{RenewTime: t0, DurationSecs: 40}
	const bound = 20 * time.Second // --node-lease-timeout caps the 40 s Lease
	for _, tc := range []struct {
		name  string
		lease eligibility.NodeLease
		at    time.Duration
		want  bool
	}{
		{"just renewed", lease, 0, false},
		{"renew interval passed, renewal on its way", lease, 10*time.Second + 500*time.Millisecond, false},
		{"silent for 60 % of the bound", lease, 12 * time.Second, true},
		{"lapsed", lease, 25 * time.Second, true},
		{"seen renewed later than its RenewTime (skewed kubelet)", eligibility.NodeLease{RenewTime: t0, ObservedAt: t0.Add(10 * time.Second), DurationSecs: 40}, 15 * time.Second, false},
		{"a 3 s Lease silent for 2 s", eligibility.NodeLease{RenewTime: t0, DurationSecs: 3}, 2 * time.Second, true},
		{"no renewal", eligibility.NodeLease{DurationSecs: 40}, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Lapsing(tc.lease, bound, t0.Add(tc.at)); got != tc.want {
				t.Errorf("Lapsing at +%s = %v, want %v", tc.at, got, tc.want)
			}
		})
	}
}
