package main

import (
	"strings"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

func fakeRun(overFloor float64, claCount, redundant int, busy bool) benchfmt.XDSRun {
	return benchfmt.XDSRun{Finished: time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC), Commit: "abc1234", Clients: 100,
		Registries: 100, PodsPerRegistry: 4, TargetRate: 100, Changes: 10, CLAs: claCount, RedundantCLAs: redundant,
		P99OverFloor: overFloor, Busy: busy, AllAcks: benchfmt.XDSLag{P50: 50, P99: overFloor + 20}, Floor: benchfmt.XDSLag{P99: 20}}
}

func TestTargets(t *testing.T) {
	for _, tc := range []struct {
		name       string
		runs       []benchfmt.XDSRun
		want       []string // substrings of the notes
		wantMedian string   // the p99-over-floor row's median
	}{
		{
			name:       "both met on a quiet machine",
			runs:       []benchfmt.XDSRun{fakeRun(40, 1000, 0, false), fakeRun(90, 1000, 0, false), fakeRun(300, 1000, 0, false)},
			want:       []string{"floor of the same run: **met** (median 90 ms over 3 runs)", "per push: **met** (3 of 3 runs", "Quiet"},
			wantMedian: "90",
		},
		{
			name:       "the median decides the latency target; one redundant CLA misses the other",
			runs:       []benchfmt.XDSRun{fakeRun(140, 1000, 0, true), fakeRun(90, 1000, 1, false), fakeRun(300, 1000, 0, false)},
			want:       []string{"floor of the same run: **missed** (median 140 ms", "per push: **missed** (2 of 3 runs", "**Busy**: in 1 of 3 runs"},
			wantMedian: "140",
		},
		{
			name:       "a CLA too many (two per change for one client) misses",
			runs:       []benchfmt.XDSRun{fakeRun(10, 1001, 0, false)},
			want:       []string{"per push: **missed** (0 of 1 runs"},
			wantMedian: "10",
		},
		{
			name:       "even runs: the median is the mean of the middle two",
			runs:       []benchfmt.XDSRun{fakeRun(80, 1000, 0, false), fakeRun(130, 1000, 0, false)},
			want:       []string{"**missed** (median 105 ms over 2 runs)"},
			wantMedian: "105",
		},
	} {
		env := envelope(tc.runs, "make bench-xds", benchfmt.Machine{Cores: 2})
		tbl := env.Tables[0]
		notes := strings.Join(tbl.Notes, "\n")
		for _, w := range tc.want {
			if !strings.Contains(notes, w) {
				t.Errorf("%s: notes lack %q:\n%s", tc.name, w, notes)
			}
		}
		found := false
		for _, r := range tbl.Rows {
			if strings.HasPrefix(r[0], "**p99 all-ACK − p99 floor") {
				found = true
				if r[1] != tc.wantMedian {
					t.Errorf("%s: p99 over floor median %q, want %q", tc.name, r[1], tc.wantMedian)
				}
			}
		}
		if !found {
			t.Errorf("%s: no p99-over-floor row", tc.name)
		}
		if env.Kind != "bench-xds" || env.Commit != "abc1234" || env.Date != "2026-12-01T11:00:00Z" || tbl.ID != "bench-xds" {
			t.Errorf("%s: envelope %s %s %s %s", tc.name, env.Kind, env.Commit, env.Date, tbl.ID)
		}
	}
}
