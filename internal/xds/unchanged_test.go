package xds_test

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/xds"
)

// TestUnchangedPublishDoesNotRebuild: a reconcile of a large registry whose verdicts did not
// change (a new pod created not ready yet, a pod's label touched) must not rebuild and compare
// the whole ClusterLoadAssignment. In a rolling update of one 2,000-pod service (bench/rollout,
// docs/xds.md) rebuilding the assignment and proto.Equal with the previous one on every
// reconcile was ~30 % of the operator's CPU. Here the same 2,000 verdicts published again cost
// a few allocations, not several per endpoint; a change after them is still pushed.
func TestUnchangedPublishDoesNotRebuild(t *testing.T) {
	s := xds.New(xds.Config{Log: logr.Discard()})
	const n = 2000
	pods := make([]publish.Pod, n)
	for i := range pods {
		pods[i] = pod(fmt.Sprintf("web-%05d", i), v1beta1.EndpointRegistered, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), "")
	}
	reg := registry("ns", "web", pods...)
	if res := s.Publish(reg); !res.OK() {
		t.Fatalf("publish: %+v", res)
	}
	allocs := testing.AllocsPerRun(5, func() { s.Publish(reg) })
	if allocs > n/10 {
		t.Fatalf("republishing %d unchanged verdicts made %.0f allocations: the assignment is rebuilt (want at most %d)", n, allocs, n/10)
	}
	// A change is still pushed: one pod draining.
	changed := registry("ns", "web", append([]publish.Pod(nil), pods...)...)
	changed.Pods[7].State = v1beta1.EndpointDraining
	s.Publish(changed)
	cla := s.LoadAssignment(xds.ResourceName("web", "ns"))
	draining := 0
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			if lb.GetHealthStatus().String() == "DRAINING" {
				draining++
			}
		}
	}
	if draining != 1 {
		t.Fatalf("after one pod turned Draining the assignment has %d DRAINING endpoints, want 1", draining)
	}
}

// BenchmarkPublishOneChangeOf2000: the publish of a 2,000-pod registry in which one pod
// changed (a rolling update's transition; make bench-rollout), alternately ready and
// draining: the server's work per transition, before any stream sends it.
func BenchmarkPublishOneChangeOf2000(b *testing.B) {
	s := xds.New(xds.Config{Log: logr.Discard()})
	const n = 2000
	pods := make([]publish.Pod, n)
	for i := range pods {
		pods[i] = pod(fmt.Sprintf("web-%05d", i), v1beta1.EndpointRegistered, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), fmt.Sprintf("zone-%d", i%3))
	}
	regs := [2]publish.Registry{registry("ns", "web", pods...), registry("ns", "web", append([]publish.Pod(nil), pods...)...)}
	regs[1].Pods[1000].State = v1beta1.EndpointDraining
	if res := s.Publish(regs[0]); !res.OK() {
		b.Fatalf("publish: %+v", res)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.Publish(regs[(i+1)%2])
	}
}
