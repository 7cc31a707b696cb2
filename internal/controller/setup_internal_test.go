package controller

import (
	"context"
	"testing"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/internal/lazylog"
)

// TestSelectsPod checks the matchLabels fast path against labels.Selector, which it replaces.
func TestSelectsPod(t *testing.T) {
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
			if got := selectsPod(&tt.sel, pod); got != tt.want {
				t.Errorf("selectsPod = %v, want %v", got, tt.want)
			}
			sel, err := metav1.LabelSelectorAsSelector(&tt.sel)
			reference := err == nil && !sel.Empty() && sel.Matches(pod)
			if reference != tt.want {
				t.Errorf("labels.Selector says %v: the fast path must agree", reference)
			}
		})
	}
}

// TestRegistryControllerLogsLazily: the options the ServiceRegistry controller is built with
// (builder.WithOptions replaces every option set before it, the log constructor included)
// give each reconcile a logger that defers its pairs (internal/lazylog), with and without
// shards.
func TestRegistryControllerLogsLazily(t *testing.T) {
	base := funcr.New(func(prefix, args string) {}, funcr.Options{})
	for _, opts := range []Options{{}, {Shards: allShards{}}} {
		o := registryControllerOptions(nil, base, opts)
		if o.LogConstructor == nil {
			t.Fatalf("shards %v: no log constructor: reconciles get controller-runtime's, which encodes its pairs at once", opts.Shards != nil)
		}
		req := &reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}
		if !lazylog.Deferred(o.LogConstructor(req)) || !lazylog.Deferred(o.LogConstructor(nil)) {
			t.Fatalf("shards %v: the reconcile logger does not defer its pairs", opts.Shards != nil)
		}
	}
}

// allShards owns everything (a one-replica Shards for option tests).
type allShards struct{}

func (allShards) Owns(string) bool                                             { return true }
func (allShards) Begin(string) (func(), bool)                                  { return func() {}, true }
func (allShards) OnAcquire(func(context.Context, func(namespace string) bool)) {}
func (allShards) OnRelease(func(func(namespace string) bool))                  {}
