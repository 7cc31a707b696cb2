package selindex

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestSelectsAgreesWithLabelsSelector checks the matchLabels fast path against
// labels.Selector, which it replaces.
func TestSelectsAgreesWithLabelsSelector(t *testing.T) {
	pod := labels.Set{"app": "web", "tier": "front"}
	tests := []struct {
		name string
		sel  metav1.LabelSelector
		want bool
	}{
		{"empty selects nothing", metav1.LabelSelector{}, false},
		{"one label", metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, true},
		{"two labels", metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}, true},
		{"other value", metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}, false},
		{"missing key", metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "zone": "a"}}, false},
		{"empty value does not match a missing key", metav1.LabelSelector{MatchLabels: map[string]string{"zone": ""}}, false},
		{"expression", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front", "back"}}}}, true},
		{"labels and a failing expression", metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}, false},
		{"invalid expression", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: "Bogus"}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Selects(&tt.sel, pod); got != tt.want {
				t.Errorf("Selects = %v, want %v", got, tt.want)
			}
			sel, err := metav1.LabelSelectorAsSelector(&tt.sel)
			reference := err == nil && !sel.Empty() && sel.Matches(pod)
			if reference != tt.want {
				t.Errorf("labels.Selector says %v: the fast path must agree", reference)
			}
		})
	}
}
