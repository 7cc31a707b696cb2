package selindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ml(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func lbl(kv ...string) map[string]string { return ml(kv...).MatchLabels }

func TestSelects(t *testing.T) {
	tests := []struct {
		name string
		sel  metav1.LabelSelector
		pod  map[string]string
		want bool
	}{
		{"empty selects nothing", metav1.LabelSelector{}, lbl("app", "web"), false},
		{"matchLabels match", *ml("app", "web"), lbl("app", "web", "x", "y"), true},
		{"matchLabels value differs", *ml("app", "web"), lbl("app", "api"), false},
		{"matchLabels key missing", *ml("app", "web", "tier", "a"), lbl("app", "web"), false},
		{"expression In", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}, lbl("app", "api"), true},
		{"expression NotIn", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}}, lbl("app", "api"), true},
		{"invalid expression selects nothing", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn}}}, lbl("app", "web"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Selects(&tt.sel, tt.pod); got != tt.want {
				t.Errorf("Selects = %v, want %v", got, tt.want)
			}
		})
	}
}

// op is one step of a scenario: a call on the index and what it must return.
type op struct {
	do   func(x *Index) []string
	want []string // checked unless nil; []string{} for none
	// podsOf, when set, is checked after the step: registry → its pods.
	podsOf map[string][]string
}

func setPod(name string, l map[string]string) func(*Index) []string {
	return func(x *Index) []string { return x.SetPod("ns", name, l) }
}
func delPod(name string) func(*Index) []string {
	return func(x *Index) []string { return x.DeletePod("ns", name) }
}
func setReg(name string, s *metav1.LabelSelector) func(*Index) []string {
	return func(x *Index) []string { x.SetRegistry("ns", name, s); return nil }
}
func delReg(name string) func(*Index) []string {
	return func(x *Index) []string { x.DeleteRegistry("ns", name); return nil }
}

func TestScenarios(t *testing.T) {
	inWebAPI := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}
	tests := []struct {
		name  string
		steps []op
	}{
		{"pod event reaches the registries selecting it", []op{
			{do: setReg("web", ml("app", "web"))},
			{do: setReg("api", ml("app", "api"))},
			{do: setPod("p1", lbl("app", "web")), want: []string{"web"}, podsOf: map[string][]string{"web": {"p1"}, "api": nil}},
			{do: setPod("p1", lbl("app", "web")), want: []string{"web"}}, // status-only update
			{do: delPod("p1"), want: []string{"web"}, podsOf: map[string][]string{"web": nil}},
		}},
		{"label change reaches the old and the new registry", []op{
			{do: setReg("web", ml("app", "web"))},
			{do: setReg("api", ml("app", "api"))},
			{do: setPod("p1", lbl("app", "web"))},
			{do: setPod("p1", lbl("app", "api")), want: []string{"api", "web"}, podsOf: map[string][]string{"web": nil, "api": {"p1"}}},
			{do: setPod("p1", lbl("app", "api")), want: []string{"api"}},
			{do: setPod("p1", lbl("app", "none")), want: []string{"api"}, podsOf: map[string][]string{"api": nil}},
			{do: setPod("p1", lbl("app", "none")), want: []string{}},
		}},
		{"registry created after its pods finds them", []op{
			{do: setPod("p1", lbl("app", "web", "tier", "a"))},
			{do: setPod("p2", lbl("app", "web", "tier", "b"))},
			{do: setPod("p3", lbl("app", "api", "tier", "a"))},
			{do: setReg("web-a", ml("app", "web", "tier", "a")), podsOf: map[string][]string{"web-a": {"p1"}}},
			{do: setReg("tier-a", ml("tier", "a")), podsOf: map[string][]string{"tier-a": {"p1", "p3"}}},
			{do: setPod("p1", lbl("app", "web", "tier", "a", "v", "2")), want: []string{"tier-a", "web-a"}},
		}},
		{"selector change moves the registry's pods", []op{
			{do: setPod("p1", lbl("app", "web"))},
			{do: setPod("p2", lbl("app", "api"))},
			{do: setReg("r", ml("app", "web")), podsOf: map[string][]string{"r": {"p1"}}},
			{do: setReg("r", ml("app", "api")), podsOf: map[string][]string{"r": {"p2"}}},
			{do: setPod("p1", lbl("app", "web", "x", "1")), want: []string{}},
			{do: setPod("p2", lbl("app", "api", "x", "1")), want: []string{"r"}},
		}},
		{"expression selectors are evaluated for every pod", []op{
			{do: setReg("ex", inWebAPI)},
			{do: setPod("p1", lbl("app", "api")), want: []string{"ex"}, podsOf: map[string][]string{"ex": {"p1"}}},
			{do: setPod("p2", lbl("app", "db")), want: []string{}},
			{do: setReg("ex2", inWebAPI), podsOf: map[string][]string{"ex2": {"p1"}}},
		}},
		{"empty and invalid selectors select nothing", []op{
			{do: setReg("empty", &metav1.LabelSelector{})},
			{do: setReg("bad", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In"}}})},
			{do: setPod("p1", lbl("app", "web")), want: []string{}, podsOf: map[string][]string{"empty": nil, "bad": nil}},
		}},
		{"deleted registry is no longer reached", []op{
			{do: setReg("web", ml("app", "web"))},
			{do: setPod("p1", lbl("app", "web"))},
			{do: delReg("web")},
			{do: setPod("p1", lbl("app", "web", "x", "y")), want: []string{}},
			{do: setReg("web", ml("app", "web")), podsOf: map[string][]string{"web": {"p1"}}},
		}},
		{"deleting an unknown pod or registry is harmless", []op{
			{do: delPod("ghost"), want: []string{}},
			{do: delReg("ghost")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New()
			for i, s := range tt.steps {
				got := s.do(x)
				if s.want != nil && !slices.Equal(got, s.want) {
					t.Fatalf("step %d returned %v, want %v", i, got, s.want)
				}
				for reg, want := range s.podsOf {
					got, ok := x.PodsOf("ns", reg)
					if !ok {
						t.Fatalf("step %d: registry %s unknown", i, reg)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("step %d: PodsOf(%s) = %v, want %v", i, reg, got, want)
					}
				}
			}
		})
	}
}

// TestMatchesBruteForce replays random pod and registry changes and checks, after each,
// that the index agrees with evaluating every selector against every pod.
func TestMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 16))
	vals := []string{"a", "b", "c"}
	randLabels := func() map[string]string {
		l := map[string]string{}
		for _, k := range []string{"app", "tier", "v"} {
			if rng.IntN(3) > 0 {
				l[k] = vals[rng.IntN(len(vals))]
			}
		}
		return l
	}
	randSelector := func() *metav1.LabelSelector {
		if rng.IntN(5) == 0 {
			return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: vals[:1+rng.IntN(2)]}}}
		}
		return &metav1.LabelSelector{MatchLabels: randLabels()}
	}
	x := New()
	pods := map[string]map[string]string{}
	regs := map[string]*metav1.LabelSelector{}
	for step := range 800 {
		switch rng.IntN(6) {
		case 0, 1, 2:
			name := fmt.Sprintf("p%d", rng.IntN(40))
			old := pods[name]
			l := randLabels()
			got := x.SetPod("ns", name, l)
			pods[name] = l
			var want []string
			for r, s := range regs {
				if (old != nil && Selects(s, old)) || Selects(s, l) {
					want = append(want, r)
				}
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: SetPod(%s) = %v, want %v", step, name, got, want)
			}
		case 3:
			name := fmt.Sprintf("p%d", rng.IntN(40))
			x.DeletePod("ns", name)
			delete(pods, name)
		case 4:
			name := fmt.Sprintf("r%d", rng.IntN(10))
			s := randSelector()
			x.SetRegistry("ns", name, s)
			regs[name] = s
		case 5:
			name := fmt.Sprintf("r%d", rng.IntN(10))
			x.DeleteRegistry("ns", name)
			delete(regs, name)
		}
		for r, s := range regs {
			var want []string
			for p, l := range pods {
				if Selects(s, l) {
					want = append(want, p)
				}
			}
			slices.Sort(want)
			got, _ := x.PodsOf("ns", r)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: PodsOf(%s) = %v, want %v", step, r, got, want)
			}
		}
		probe := randSelector()
		var wantMatching []string
		for p, l := range pods {
			if Selects(probe, l) {
				wantMatching = append(wantMatching, p)
			}
		}
		slices.Sort(wantMatching)
		if got := x.Matching("ns", probe); !slices.Equal(got, wantMatching) {
			t.Fatalf("step %d: Matching(%v) = %v, want %v", step, probe, got, wantMatching)
		}
		for p, l := range pods {
			var want []string
			for r, s := range regs {
				if Selects(s, l) {
					want = append(want, r)
				}
			}
			slices.Sort(want)
			if got := x.RegistriesOf("ns", p); !slices.Equal(got, want) {
				t.Fatalf("step %d: RegistriesOf(%s) = %v, want %v", step, p, got, want)
			}
		}
	}
}

// TestWorkIsProportionalToTheChange: with 2,000 registries and 20,000 pods in a namespace,
// a pod event evaluates only the selectors anchored under its labels, a status-only event
// none, and a new registry only the pods carrying its anchor label.
func TestWorkIsProportionalToTheChange(t *testing.T) {
	x := New()
	for i := range 2000 {
		x.SetRegistry("ns", fmt.Sprintf("svc-%d", i), ml("app", fmt.Sprintf("svc-%d", i)))
	}
	for i := range 20000 {
		x.SetPod("ns", fmt.Sprintf("pod-%d", i), lbl("app", fmt.Sprintf("svc-%d", i%2000), "pod-template-hash", "abc"))
	}
	base := x.Stats("ns").SelectorsEvaluated
	if got := x.SetPod("ns", "pod-7", lbl("app", "svc-7", "pod-template-hash", "abc")); !slices.Equal(got, []string{"svc-7"}) {
		t.Fatalf("status-only event reached %v", got)
	}
	if d := x.Stats("ns").SelectorsEvaluated - base; d != 0 {
		t.Errorf("a status-only pod event evaluated %d selectors, want 0", d)
	}
	base = x.Stats("ns").SelectorsEvaluated
	if got := x.SetPod("ns", "pod-7", lbl("app", "svc-8", "pod-template-hash", "abc")); !slices.Equal(got, []string{"svc-7", "svc-8"}) {
		t.Fatalf("relabel reached %v", got)
	}
	if d := x.Stats("ns").SelectorsEvaluated - base; d != 1 {
		t.Errorf("a relabelled pod evaluated %d selectors, want 1 (the one anchored under its new label)", d)
	}
	base = x.Stats("ns").SelectorsEvaluated
	x.SetRegistry("ns", "new", ml("app", "svc-9"))
	if d := x.Stats("ns").SelectorsEvaluated - base; d != 10 {
		t.Errorf("a new registry evaluated %d pods, want 10 (those labelled app=svc-9)", d)
	}
	base = x.Stats("ns").PodsListed
	pods, _ := x.PodsOf("ns", "svc-9")
	if len(pods) != 10 || x.Stats("ns").PodsListed-base != 10 {
		t.Errorf("PodsOf listed %d pods (counted %d), want 10", len(pods), x.Stats("ns").PodsListed-base)
	}
	if x.SetRegistry("ns", "new", ml("app", "svc-9")) {
		t.Error("an unchanged selector reported a change")
	}
}
