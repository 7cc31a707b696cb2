package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const coldLog = `go version go1.26.8 linux/amd64
=== ci: commit 0123456789abcdef0123 started 2026-12-05T09:05:18Z
2 cores, load average 1.33 0.69 0.26, GOCACHE /c/gocache, GOMODCACHE /c/gomod
=== phase: module download (09:05:18 UTC)
ok  	github.com/registrar-dev/registrar/internal/plan	1.2s

CI phases (2 cores, 2026-12-05T09:45:00Z):
| phase                              |  wall s |    CPU s | exit |
|---|---:|---:|---:|
| module download                    |       4 |        6 |    0 |
| build etcd                         |      36 |       68 |    0 |
| make test                          |     687 |      861 |    0 |
| make lint                          |      62 |      117 |    1 |
| total                              |     789 |     1052 |      |
(13 min 09 s wall)
=== ci: finished 2026-12-05T09:45:00Z load average 2.10 1.90 1.50
`

func TestParse(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cold.log")
	if err := os.WriteFile(p, []byte(coldLog), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := parse(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Commit != "0123456789abcdef0123" || r.Started != "2026-12-05T09:05:18Z" || r.Finished != "2026-12-05T09:45:00Z" {
		t.Errorf("header: %+v", r)
	}
	if r.Cores != 2 || r.LoadBefore == nil || *r.LoadBefore != [3]float64{1.33, 0.69, 0.26} || r.LoadAfter == nil || *r.LoadAfter != [3]float64{2.10, 1.90, 1.50} {
		t.Errorf("machine: %+v", r)
	}
	if len(r.Phases) != 4 { // the total row is not a phase
		t.Fatalf("phases: %+v", r.Phases)
	}
	if r.WallS != 789 || r.CPUS != 1052 || r.Passed {
		t.Errorf("totals: wall %v cpu %v passed %v; want 789, 1052, false (make lint exit 1)", r.WallS, r.CPUS, r.Passed)
	}
	w, c, ok := untilMakeTest(r)
	if !ok || w != 727 || c != 935 {
		t.Errorf("until make test: %v %v %v; want 727 935 true", w, c, ok)
	}
}

func TestParseRefusesLogWithoutHeaderOrTable(t *testing.T) {
	for name, text := range map[string]string{
		"no table":  "=== ci: commit abc started 2026-12-05T09:05:18Z\n",
		"no header": strings.SplitN(coldLog, "\n", 3)[2],
	} {
		p := filepath.Join(t.TempDir(), "x.log")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := parse(p); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestTablesMarkFailedPhaseAndMissingOnes(t *testing.T) {
	a := ciRun{Commit: "aaa", Phases: []phase{{Name: "make test", WallS: 10, CPUS: 20}, {Name: "make lint", WallS: 5, CPUS: 5, Exit: 2}}, WallS: 15, CPUS: 25}
	b := ciRun{Commit: "bbb", Phases: []phase{{Name: "make test", WallS: 12, CPUS: 22}}, WallS: 12, CPUS: 22, Passed: true}
	ts := tables([]ciRun{a, b}, &b)
	if len(ts) != 2 || ts[0].ID != "ci-cold-phases" || ts[1].ID != "ci-make-test" {
		t.Fatalf("tables: %+v", ts)
	}
	lint := ts[0].Rows[1]
	if lint[1] != "5 (exit 2)" || lint[3] != "—" {
		t.Errorf("make lint row %v: want the exit marked and run 2 missing", lint)
	}
	if !strings.Contains(ts[0].Notes[0], "FAILED") || !strings.Contains(ts[0].Notes[1], "passed") {
		t.Errorf("notes: %v", ts[0].Notes)
	}
	if len(ts[1].Rows) != 3 || ts[1].Rows[2][0] != "warm" {
		t.Errorf("make test rows: %v", ts[1].Rows)
	}
}

// TestIdleMachineLoadIsRecorded: a run started on an idle machine prints load average 0.00;
// that is a measured load, not a missing one.
func TestIdleMachineLoadIsRecorded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "idle.log")
	text := strings.Replace(coldLog, "load average 1.33 0.69 0.26", "load average 0.00 0.00 0.00", 1)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := parse(p)
	if err != nil {
		t.Fatal(err)
	}
	ts := tables([]ciRun{r}, nil)
	if !strings.Contains(ts[0].Notes[0], "load average 0.00 / 0.00 / 0.00 before") {
		t.Errorf("note %q: want the idle load stated", ts[0].Notes[0])
	}
	if err := os.WriteFile(p, []byte(strings.Replace(text, " load average 2.10 1.90 1.50", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err = parse(p); err != nil {
		t.Fatal(err)
	}
	if ts := tables([]ciRun{r}, nil); !strings.Contains(ts[0].Notes[0], "not recorded after") {
		t.Errorf("note %q: want a missing load said to be missing", ts[0].Notes[0])
	}
}
