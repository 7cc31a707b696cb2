package discovery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// The hot path of Do with and without breakers: fn does nothing, so the difference is
// what the breakers add to a call (make bench-breaker prints it).
func BenchmarkDoNoBreaker(b *testing.B) {
	benchmarkDo(b, "bench-nobrk", discovery.BreakerConfig{Disabled: true})
}

func BenchmarkDoBreaker(b *testing.B) {
	benchmarkDo(b, "bench-brk", discovery.BreakerConfig{})
}

func BenchmarkDoCoordinatedBreaker(b *testing.B) {
	benchmarkDo(b, "bench-coord", discovery.BreakerConfig{Coordinated: &discovery.CoordinatedConfig{Quorum: 2, StoreTimeout: 10 * time.Second}})
}

func benchmarkDo(b *testing.B, service string, br discovery.BreakerConfig) {
	srv := requireServer(b)
	cli := storeClient(b, srv)
	for i := range 3 {
		put(b, cli, service, fmt.Sprintf("p%d", i), fmt.Sprintf("10.9.0.%d", i))
	}
	c := newClient(b, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: service, Breaker: br})
	waitSynced(b, c)
	deadline := time.Now().Add(eventually)
	for len(c.All()) < 3 || (br.Coordinated != nil && c.BreakerStats().Coordinated.Fallback) {
		if time.Now().After(deadline) {
			b.Fatalf("client not ready: %d instances, %+v", len(c.All()), c.BreakerStats().Coordinated)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	fn := func(context.Context, discovery.Instance) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Do(ctx, 2, fn); err != nil {
			b.Fatal(err)
		}
	}
	if st := c.BreakerStats().Coordinated; st != nil && st.StoreWrites != 0 {
		b.Fatalf("the hot path wrote to the store %d times", st.StoreWrites)
	}
}
