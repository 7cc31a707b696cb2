package discovery

import (
	"math"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/pkg/wire"
)

func TestFloorMod(t *testing.T) {
	tests := []struct {
		x    int64
		n    int
		want int
	}{
		{0, 3, 0}, {4, 3, 1}, {-1, 3, 2}, {-3, 3, 0}, {-4, 3, 2},
		{math.MaxInt64, 2, 1}, {math.MinInt64, 2, 0}, {math.MinInt64, 3, 1}, {math.MinInt64 + 1, 5, 3},
	}
	for _, tt := range tests {
		if got := floorMod(tt.x, tt.n); got != tt.want {
			t.Errorf("floorMod(%d, %d) = %d, want %d", tt.x, tt.n, got, tt.want)
		}
	}
}

func TestFullJitter(t *testing.T) {
	const base, max = 100 * time.Millisecond, 10 * time.Second
	tests := []struct {
		name string
		n    int
		f    float64
		want time.Duration
	}{
		{"draw 0 waits nothing", 3, 0, 0},
		{"first attempt, top of the window", 0, 0.999, 99900 * time.Microsecond},
		{"window doubles", 3, 0.5, 400 * time.Millisecond},
		{"window capped", 20, 0.5, 5 * time.Second},
		{"huge attempt stays capped", 1000, 0.5, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fullJitter(base, max, tt.n, tt.f); got != tt.want {
				t.Errorf("fullJitter(n=%d, f=%v) = %s, want %s", tt.n, tt.f, got, tt.want)
			}
		})
	}
}

func TestMaxEjected(t *testing.T) {
	tests := []struct{ n, percent, want int }{
		{0, 50, 0}, {1, 50, 0}, {1, 100, 0}, {2, 50, 1}, {3, 50, 1}, {4, 50, 2}, {5, 10, 1}, {100, 10, 10}, {4, 100, 4},
	}
	for _, tt := range tests {
		if got := maxEjected(tt.n, tt.percent); got != tt.want {
			t.Errorf("maxEjected(%d, %d%%) = %d, want %d", tt.n, tt.percent, got, tt.want)
		}
	}
}

func TestDiff(t *testing.T) {
	inst := func(k string, rev int64) Instance {
		return Instance{Endpoint: wire.Endpoint{Pod: k}, Key: k, Revision: rev}
	}
	old := &snapshot{instances: []Instance{inst("a", 1), inst("b", 1), inst("c", 1)}}
	cur := &snapshot{instances: []Instance{inst("b", 1), inst("c", 2), inst("d", 3)}}
	ch := diff(old, cur)
	if len(ch.Removed) != 1 || ch.Removed[0].Key != "a" || len(ch.Added) != 1 || ch.Added[0].Key != "d" ||
		len(ch.Updated) != 1 || ch.Updated[0].Key != "c" {
		t.Errorf("diff = %+v", ch)
	}
}
