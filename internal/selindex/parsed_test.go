package selindex

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// TestParsedAnswersAsTheParser: whatever was asked before, Of answers what
// metav1.LabelSelectorAsSelector answers for the selector asked about now.
func TestParsedAnswersAsTheParser(t *testing.T) {
	name := types.NamespacedName{Namespace: "ns", Name: "web"}
	steps := []struct {
		name string
		ls   metav1.LabelSelector
	}{
		{"matchLabels", metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		{"same again", metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		{"value changed", metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}},
		{"label added", metav1.LabelSelector{MatchLabels: map[string]string{"app": "api", "tier": "1"}}},
		{"expression", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}},
		{"expression values changed", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}},
		{"invalid", metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}},
		{"invalid again", metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}},
		{"empty", metav1.LabelSelector{}},
		{"valid again", metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	var p Parsed
	pods := []labels.Set{{"app": "web"}, {"app": "api"}, {"app": "api", "tier": "1"}, {}}
	for _, step := range steps {
		want, wantErr := metav1.LabelSelectorAsSelector(&step.ls)
		got, err := p.Of(name, &step.ls)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: error %v, want %v", step.name, err, wantErr)
		}
		if wantErr != nil {
			continue
		}
		if got.String() != want.String() {
			t.Fatalf("%s: selector %q, want %q", step.name, got, want)
		}
		for _, pod := range pods {
			if got.Matches(pod) != want.Matches(pod) {
				t.Fatalf("%s: matches %v = %v, want %v", step.name, pod, got.Matches(pod), want.Matches(pod))
			}
		}
	}
}

// TestParsedKeepsItsOwnCopy: changing the selector object asked about after the fact does not
// change what is remembered for it.
func TestParsedKeepsItsOwnCopy(t *testing.T) {
	name := types.NamespacedName{Namespace: "ns", Name: "web"}
	var p Parsed
	ls := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	if _, err := p.Of(name, &ls); err != nil {
		t.Fatal(err)
	}
	ls.MatchLabels["app"] = "api" // the same map, mutated
	sel, err := p.Of(name, &ls)
	if err != nil || !sel.Matches(labels.Set{"app": "api"}) || sel.Matches(labels.Set{"app": "web"}) {
		t.Fatalf("after the selector changed in place: %v, %v", sel, err)
	}
	p.Forget(name)
	p.Forget(types.NamespacedName{Name: "never-asked"})
	if sel, err := p.Of(name, &ls); err != nil || !sel.Matches(labels.Set{"app": "api"}) {
		t.Fatalf("after Forget: %v, %v", sel, err)
	}
}
