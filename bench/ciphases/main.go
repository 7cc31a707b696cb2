// Command ciphases turns the logs of `.ci/run` into a measurement file for docs/bench: each
// log's phase table (hack/ci-phases.sh prints it at the end of the run) becomes a run, and the
// runs become two tables that bench/benchdoc renders into docs/testing.md: every phase's wall and
// CPU time side by side, and the time of `make test` on a fresh clone (every phase up to and
// including it: the module download and the builds it needs) beside a warm run's.
//
//	go run ./bench/ciphases -o docs/bench/ci-2026-12-05.json -warm bin/warm.log cold1.log cold2.log
//
// A log names its run with the lines hack/ci-phases.sh prints: "=== ci: commit SHA started
// RFC3339" and "N cores, load average A B C" at the start, "=== ci: finished RFC3339 load
// average A B C" at the end. The warm log is the phase table of a `make test` run in a clone
// whose caches a cold run already filled.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// phase is one row of a run's phase table.
type phase struct {
	Name  string  `json:"name"`
	WallS float64 `json:"wall_s"`
	CPUS  float64 `json:"cpu_s"`
	Exit  int     `json:"exit"`
}

// ciRun is one `.ci/run` (or one warm `make test`) as its log tells it.
type ciRun struct {
	Log      string `json:"log"`
	Commit   string `json:"commit"`
	Started  string `json:"started"`
	Finished string `json:"finished"`
	Cores    int    `json:"cores"`
	// LoadBefore and LoadAfter are nil when the log did not print them (0.00 is a load).
	LoadBefore *[3]float64 `json:"load_before,omitempty"`
	LoadAfter  *[3]float64 `json:"load_after,omitempty"`
	Phases     []phase     `json:"phases"`
	WallS      float64     `json:"wall_s"`
	CPUS       float64     `json:"cpu_s"`
	Passed     bool        `json:"passed"`
}

// entry is what the file holds per run: the cold runs, then the warm one.
type entry struct {
	Kind string `json:"kind"` // "cold" or "warm"
	ciRun
}

var (
	headerRE   = regexp.MustCompile(`^=== ci: commit ([0-9a-f]+) started (\S+)`)
	loadRE     = regexp.MustCompile(`^(\d+) cores, load average ([\d.]+) ([\d.]+) ([\d.]+)`)
	finishedRE = regexp.MustCompile(`^=== ci: finished (\S+)(?: load average ([\d.]+) ([\d.]+) ([\d.]+))?`)
	rowRE      = regexp.MustCompile(`^\|\s*(.+?)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|$`)
)

// parse reads one log.
func parse(path string) (ciRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return ciRun{}, err
	}
	defer f.Close()
	r := ciRun{Log: path}
	inTable := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case headerRE.MatchString(line):
			m := headerRE.FindStringSubmatch(line)
			r.Commit, r.Started = m[1], m[2]
		case loadRE.MatchString(line) && r.Cores == 0:
			m := loadRE.FindStringSubmatch(line)
			r.Cores, _ = strconv.Atoi(m[1])
			l := floats(m[2:5])
			r.LoadBefore = &l
		case finishedRE.MatchString(line):
			m := finishedRE.FindStringSubmatch(line)
			r.Finished = m[1]
			if m[2] != "" {
				l := floats(m[2:5])
				r.LoadAfter = &l
			}
		case strings.HasPrefix(line, "CI phases ("):
			inTable, r.Phases = true, nil // the last table of the log counts
		case inTable && rowRE.MatchString(line):
			m := rowRE.FindStringSubmatch(line)
			p := phase{Name: m[1]}
			p.WallS, _ = strconv.ParseFloat(m[2], 64)
			p.CPUS, _ = strconv.ParseFloat(m[3], 64)
			p.Exit, _ = strconv.Atoi(m[4])
			r.Phases = append(r.Phases, p)
		case inTable && !strings.HasPrefix(line, "|"):
			inTable = false
		}
	}
	if err := sc.Err(); err != nil {
		return ciRun{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Phases) == 0 {
		return ciRun{}, fmt.Errorf("%s: no phase table (hack/ci-phases.sh phase_report)", path)
	}
	if r.Commit == "" || r.Started == "" {
		return ciRun{}, fmt.Errorf("%s: no '=== ci: commit SHA started TIME' line", path)
	}
	r.Passed = true
	for _, p := range r.Phases {
		r.WallS += p.WallS
		r.CPUS += p.CPUS
		if p.Exit != 0 {
			r.Passed = false
		}
	}
	return r, nil
}

func floats(s []string) [3]float64 {
	var out [3]float64
	for i := range out {
		out[i], _ = strconv.ParseFloat(s[i], 64)
	}
	return out
}

// makeTestPhase is the phase whose end is the end of a newcomer's first `make test`: every
// phase before it builds or checks something `make test` needs.
const makeTestPhase = "make test"

// untilMakeTest is the wall and CPU time of every phase up to and including `make test`, and
// whether the run has that phase.
func untilMakeTest(r ciRun) (wall, cpu float64, ok bool) {
	for _, p := range r.Phases {
		wall += p.WallS
		cpu += p.CPUS
		if p.Name == makeTestPhase {
			return wall, cpu, true
		}
	}
	return 0, 0, false
}

func minutes(s float64) string {
	return fmt.Sprintf("%d min %02d s", int(s)/60, int(s)%60)
}

// tables builds the phase table of the cold runs and the make test table.
func tables(cold []ciRun, warm *ciRun) []benchfmt.Table {
	cols := make([]string, 0, 1+2*len(cold))
	cols = append(cols, "phase")
	for i := range cold {
		cols = append(cols, fmt.Sprintf("run %d wall s", i+1), fmt.Sprintf("run %d CPU s", i+1))
	}
	var order []string
	seen := map[string]bool{}
	byRun := make([]map[string]phase, len(cold))
	for i, r := range cold {
		byRun[i] = map[string]phase{}
		for _, p := range r.Phases {
			key := p.Name
			if _, dup := byRun[i][key]; dup { // a phase name twice in one run (e.g. a cached rebuild)
				key += " (again)"
			}
			byRun[i][key] = p
		}
	}
	// Rows in the newest run's order (today's .ci/run), then phases only older runs had.
	for i := len(cold) - 1; i >= 0; i-- {
		for _, p := range cold[i].Phases {
			key := p.Name
			if seen[key] {
				if _, again := byRun[i][key+" (again)"]; again && !seen[key+" (again)"] {
					key += " (again)"
				} else {
					continue
				}
			}
			seen[key] = true
			order = append(order, key)
		}
	}
	rows := make([][]string, 0, len(order)+1)
	for _, name := range order {
		row := []string{name}
		for i := range cold {
			p, ok := byRun[i][name]
			if !ok {
				row = append(row, "—", "—")
				continue
			}
			w := strconv.FormatFloat(p.WallS, 'f', 0, 64)
			if p.Exit != 0 {
				w += fmt.Sprintf(" (exit %d)", p.Exit)
			}
			row = append(row, w, strconv.FormatFloat(p.CPUS, 'f', 0, 64))
		}
		rows = append(rows, row)
	}
	total := make([]string, 0, 1+2*len(cold))
	total = append(total, "**total**")
	notes := make([]string, 0, len(cold))
	for i, r := range cold {
		total = append(total, fmt.Sprintf("**%.0f** (%s)", r.WallS, minutes(r.WallS)), fmt.Sprintf("**%.0f**", r.CPUS))
		verdict := "passed"
		if !r.Passed {
			verdict = "FAILED"
		}
		notes = append(notes, fmt.Sprintf("Run %d: commit %s, started %s, finished %s, %s; load average %s before, %s after.",
			i+1, short(r.Commit), r.Started, r.Finished, verdict, loadText(r.LoadBefore), loadText(r.LoadAfter)))
	}
	rows = append(rows, total)
	phases := benchfmt.Table{
		ID:      "ci-cold-phases",
		Title:   "bash .ci/run in a fresh clone with empty GOCACHE, GOMODCACHE and bin/ (2 cores)",
		Columns: cols, Rows: rows, Notes: notes,
	}

	mt := benchfmt.Table{
		ID:      "ci-make-test",
		Title:   "make test on a fresh clone (every phase up to and including it) and warm",
		Columns: []string{"run", "commit", "wall", "CPU s", "what it includes"},
	}
	for i, r := range cold {
		if w, c, ok := untilMakeTest(r); ok {
			label := fmt.Sprintf("cold, run %d", i+1)
			if !r.Passed {
				label += " (failed)"
			}
			mt.Rows = append(mt.Rows, []string{label, short(r.Commit), minutes(w), strconv.FormatFloat(c, 'f', 0, 64),
				"module download, etcd, kube-apiserver, controller-gen, helm, CoreDNS, promtool builds, then make test"})
		}
	}
	if warm != nil {
		cpu := strconv.FormatFloat(warm.CPUS, 'f', 0, 64)
		if warm.CPUS == 0 { // a phase run inside a pipeline: its shell's children were not counted
			cpu = "not recorded"
		}
		mt.Rows = append(mt.Rows, []string{"warm", short(warm.Commit), minutes(warm.WallS), cpu,
			"make test again in the same clone: bin/ and the Go caches filled, test results not cached (-count=1)"})
		mt.Notes = append(mt.Notes, fmt.Sprintf("Warm run: started %s, load average %s before, %s after.",
			warm.Started, loadText(warm.LoadBefore), loadText(warm.LoadAfter)))
	}
	return []benchfmt.Table{phases, mt}
}

// loadText is a load average, or "not recorded" for a log that did not print it.
func loadText(l *[3]float64) string {
	if l == nil {
		return "not recorded"
	}
	return fmt.Sprintf("%.2f / %.2f / %.2f", l[0], l[1], l[2])
}

func short(sha string) string { return sha[:min(len(sha), 12)] }

func main() {
	out := flag.String("o", "", "Write the measurement file here (docs/bench/ci-DATE.json).")
	warmLog := flag.String("warm", "", "The log of a warm `make test` (optional).")
	command := flag.String("command", "bash .ci/run (fresh clone, empty GOCACHE, GOMODCACHE and bin/)", "The command the runs are of.")
	flag.Parse()
	if err := run(*out, *warmLog, *command, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "ciphases:", err)
		os.Exit(1)
	}
}

func run(out, warmLog, command string, logs []string) error {
	if out == "" || len(logs) == 0 {
		return errors.New("usage: ciphases -o FILE [-warm LOG] COLD-LOG")
	}
	var runs []entry
	var cold []ciRun
	for _, l := range logs {
		r, err := parse(l)
		if err != nil {
			return err
		}
		cold = append(cold, r)
		runs = append(runs, entry{Kind: "cold", ciRun: r})
	}
	var warm *ciRun
	if warmLog != "" {
		r, err := parse(warmLog)
		if err != nil {
			return err
		}
		warm = &r
		runs = append(runs, entry{Kind: "warm", ciRun: r})
	}
	last := cold[len(cold)-1]
	m := benchfmt.MachineFacts()
	m.Cores = last.Cores
	m.LoadBefore, m.LoadAfter = deref(cold[0].LoadBefore), deref(last.LoadAfter)
	if warm != nil && warm.LoadAfter != nil { // the warm run comes last
		m.LoadAfter = *warm.LoadAfter
	}
	env := benchfmt.Envelope[entry]{
		Kind: "ci-phases", Date: last.Started, Commit: last.Commit, Command: command,
		Machine: m, Runs: runs, Tables: tables(cold, warm),
	}
	data, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(data, '\n'), 0o644)
}

// deref is a load average for the envelope's machine facts (zeros when not recorded).
func deref(l *[3]float64) [3]float64 {
	if l == nil {
		return [3]float64{}
	}
	return *l
}
