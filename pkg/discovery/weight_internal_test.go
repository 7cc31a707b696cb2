package discovery

import (
	"testing"
	"time"

	"github.com/registrar-dev/registrar/pkg/wire"
)

func weightedClient(strategy Strategy, weights ...int32) *Client {
	c := &Client{cfg: Config{Strategy: strategy}, now: time.Now}
	list := make([]Instance, len(weights))
	for i, w := range weights {
		list[i] = Instance{Key: string(rune('a' + i)), Endpoint: wire.Endpoint{Pod: string(rune('a' + i)), Weight: w}}
	}
	c.snap.Store(newSnapshot(list, 1))
	return c
}

func counts(t *testing.T, c *Client, picks int, exclude map[string]bool) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range picks {
		inst, err := c.pick(exclude)
		if err != nil {
			t.Fatal(err)
		}
		got[inst.Key]++
	}
	return got
}

// TestWeightedPickShares: the picker's share of each instance follows its store weight
// (absent = full = 100): exactly for the round-robin strategies over a cycle of the total
// weight, statistically for Random; a list without weights is picked equally.
func TestWeightedPickShares(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy Strategy
		weights  []int32
		picks    int
		exclude  map[string]bool
		want     map[string]int
		slack    int
	}{
		{"round robin: 10, 100, absent", RoundRobin, []int32{10, 100, 0}, 2100, nil, map[string]int{"a": 100, "b": 1000, "c": 1000}, 0},
		{"round robin: a slow starter's step", RoundRobin, []int32{55, 0, 0}, 2550, nil, map[string]int{"a": 550, "b": 1000, "c": 1000}, 0},
		{"round robin, one excluded: among the rest by weight", RoundRobin, []int32{10, 100, 0}, 1100, map[string]bool{"c": true}, map[string]int{"a": 100, "b": 1000}, 0},
		{"least recently failed: ties by weight", LeastRecentlyFailed, []int32{1, 99}, 1000, nil, map[string]int{"a": 10, "b": 990}, 0},
		{"no weights: equal", RoundRobin, []int32{0, 100, 0}, 300, nil, map[string]int{"a": 100, "b": 100, "c": 100}, 0},
		{"random: 10, 100, absent", Random, []int32{10, 100, 0}, 21000, nil, map[string]int{"a": 1000, "b": 10000, "c": 10000}, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := weightedClient(tc.strategy, tc.weights...)
			got := counts(t, c, tc.picks, tc.exclude)
			for k, want := range tc.want {
				if d := got[k] - want; d < -tc.slack || d > tc.slack {
					t.Errorf("%s picked %d times, want %d ± %d (all: %v)", k, got[k], want, tc.slack, got)
				}
			}
		})
	}
}

// TestWeightedRoundRobinInterleaves: a heavy instance is not served its whole weight in a
// row: the light one comes up within every 25 picks (its fair interval is 11).
func TestWeightedRoundRobinInterleaves(t *testing.T) {
	c := weightedClient(RoundRobin, 10, 100)
	gap := 0
	for i := range 1100 {
		inst, _ := c.Pick()
		if inst.Key == "a" {
			gap = 0
			continue
		}
		if gap++; gap > 25 {
			t.Fatalf("pick %d: %d picks of b in a row", i, gap)
		}
	}
}

// TestWeightedPickRamp: as a slow starter's weight steps up in the store (10, 55, full), its
// share of the picks follows: 1/21, 55/255, 1/3 of a three-instance list.
func TestWeightedPickRamp(t *testing.T) {
	var shares []float64
	for _, w := range []int32{10, 55, 100} {
		c := weightedClient(RoundRobin, w, 0, 0)
		total := int(w) + 200
		got := counts(t, c, 10*total, nil)
		shares = append(shares, float64(got["a"])/float64(10*total))
	}
	want := []float64{10.0 / 210, 55.0 / 255, 1.0 / 3}
	for i := range want {
		if d := shares[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Errorf("share at step %d = %.4f, want %.4f", i, shares[i], want[i])
		}
	}
}
