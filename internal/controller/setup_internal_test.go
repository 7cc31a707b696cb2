package controller

import (
	"context"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/internal/lazylog"
)

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
