package eureka

import (
	"fmt"
	"testing"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// BenchmarkApplyAndEncode: one change to a registry of 10,000 instances in 300 services
// (rebuild of the view), then the full fetch encoded in JSON once.
func BenchmarkApplyAndEncode(b *testing.B) {
	var all []discovery.Instance
	for i := range 10000 {
		all = append(all, rec(fmt.Sprintf("svc-%03d", i%300), "ns", fmt.Sprintf("pod-%05d", i), "10.1.2.3", map[string]int32{"http": 8080}))
	}
	r := NewRegistry(RegistryOptions{DeltaMax: 100})
	r.Apply(discovery.Change{Added: all})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		changed := all[i%len(all)]
		changed.Address = fmt.Sprintf("10.9.%d.%d", i/250%250, i%250)
		r.Apply(discovery.Change{Updated: []discovery.Instance{changed}})
		body, _, _ := r.View().Body(KindApps, "", JSON)
		b.SetBytes(int64(len(body.plain)))
	}
}

// BenchmarkApply: one change to a registry of 10,000 instances, the view rebuilt, the delta
// encoded (what a client's periodic delta fetch costs after a change); no full fetch.
func BenchmarkApply(b *testing.B) {
	var all []discovery.Instance
	for i := range 10000 {
		all = append(all, rec(fmt.Sprintf("svc-%03d", i%300), "ns", fmt.Sprintf("pod-%05d", i), "10.1.2.3", map[string]int32{"http": 8080}))
	}
	r := NewRegistry(RegistryOptions{DeltaMax: 100})
	r.Apply(discovery.Change{Added: all})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		changed := all[i%len(all)]
		changed.Address = fmt.Sprintf("10.9.%d.%d", i/250%250, i%250)
		r.Apply(discovery.Change{Updated: []discovery.Instance{changed}})
		_, _, _ = r.View().Body(KindDelta, "", JSON)
	}
}
