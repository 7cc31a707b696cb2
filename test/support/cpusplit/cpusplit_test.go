package cpusplit

import (
	"math"
	"os"
	"testing"
	"time"
)

func TestSplit(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	group := func(p Proc) string {
		switch p.Comm {
		case "xds.test":
			return "operator"
		case "kube-apiserver":
			return "apiserver"
		}
		return ""
	}
	for _, tc := range []struct {
		name          string
		before, after Sample
		want          map[string]float64
		wantOther     float64
	}{
		{
			name:      "the tree's groups and the rest over 10 s",
			before:    Sample{At: t0, MachineBusy: 100, Procs: map[int]Proc{1: {PID: 1, Comm: "xds.test", CPU: 5}, 2: {PID: 2, Comm: "kube-apiserver", CPU: 1}}},
			after:     Sample{At: t0.Add(10 * time.Second), MachineBusy: 115, Procs: map[int]Proc{1: {PID: 1, Comm: "xds.test", CPU: 10}, 2: {PID: 2, Comm: "kube-apiserver", CPU: 4}}},
			want:      map[string]float64{"operator": 0.5, "apiserver": 0.3},
			wantOther: 0.7,
		},
		{
			name:      "a process started between the samples counts from zero",
			before:    Sample{At: t0, MachineBusy: 100, Procs: map[int]Proc{}},
			after:     Sample{At: t0.Add(2 * time.Second), MachineBusy: 102, Procs: map[int]Proc{7: {PID: 7, Comm: "kube-apiserver", CPU: 1}}},
			want:      map[string]float64{"apiserver": 0.5},
			wantOther: 0.5,
		},
		{
			name:      "processes in no group are the rest",
			before:    Sample{At: t0, MachineBusy: 0, Procs: map[int]Proc{3: {PID: 3, Comm: "sh", CPU: 0}}},
			after:     Sample{At: t0.Add(time.Second), MachineBusy: 1, Procs: map[int]Proc{3: {PID: 3, Comm: "sh", CPU: 1}}},
			want:      map[string]float64{},
			wantOther: 1,
		},
		{
			name:      "the rest is never negative (ticks counted at different times)",
			before:    Sample{At: t0, MachineBusy: 10, Procs: map[int]Proc{1: {PID: 1, Comm: "xds.test", CPU: 0}}},
			after:     Sample{At: t0.Add(time.Second), MachineBusy: 10.9, Procs: map[int]Proc{1: {PID: 1, Comm: "xds.test", CPU: 1}}},
			want:      map[string]float64{"operator": 1},
			wantOther: 0,
		},
	} {
		got, other := Split(tc.before, tc.after, group)
		if len(got) != len(tc.want) {
			t.Errorf("%s: groups %v, want %v", tc.name, got, tc.want)
		}
		for g, w := range tc.want {
			if math.Abs(got[g]-w) > 1e-9 {
				t.Errorf("%s: %s = %v, want %v", tc.name, g, got[g], w)
			}
		}
		if math.Abs(other-tc.wantOther) > 1e-9 {
			t.Errorf("%s: other = %v, want %v", tc.name, other, tc.wantOther)
		}
	}
}

func TestParseStat(t *testing.T) {
	p, ppid, err := parseStat("4242 (kube (api) server) S 17 4242 17 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 1000 0 0")
	if err != nil || p.PID != 4242 || p.Comm != "kube (api) server" || ppid != 17 || p.CPU != 3 {
		t.Fatalf("parseStat = %+v, ppid %d, %v", p, ppid, err)
	}
	if _, _, err := parseStat("garbage"); err == nil {
		t.Fatal("want an error for a malformed stat")
	}
	busy, err := parseMachineBusy("cpu  100 5 50 9000 40 0 10 0 7 0")
	if err != nil || busy != 1.65 {
		t.Fatalf("parseMachineBusy = %v, %v, want 1.65", busy, err)
	}
}

// TestReadSelf: the tree of this process holds it, with its CPU.
func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := s.Procs[os.Getpid()]; !ok || p.Cmdline == "" || s.MachineBusy <= 0 {
		t.Fatalf("sample of self: %+v (busy %v)", p, s.MachineBusy)
	}
}
