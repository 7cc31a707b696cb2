// Command e2e combines the raw results of several runs of the end-to-end comparison
// (test/e2e, "Comparison under load", each written by E2E_RESULTS) into one published JSON
// file with the docs/bench envelope: machine facts, every run's raw data, and three tables
// (ids e2e-rollout and e2e-failures with the median and the spread (min–max) over the runs,
// and e2e-headline, the README's compact matrix of medians).
//
//	go run ./bench/e2e -command "make bench-e2e" -out docs/bench/e2e-2026-11-30.json bin/e2e-results/run-*.json
//	go run ./bench/e2e -republish docs/bench/e2e-2026-11-30.json   # tables again from the raw runs it holds
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// envelope is the published file; its runs are kept as they were written.
type envelope = benchfmt.Envelope[json.RawMessage]

// The scenario and setup ids of test/e2e/compare_test.go that the tables treat apart.
const (
	scenarioRollout = "rollout"
	setupRegistrar  = "registrar"
)

var scenarioNames = map[string]string{
	"sigkill":   "SIGKILL (kubelet restarts it)",
	"hang":      "hung process (15 s)",
	"node-lost": "lost node (kubelet stopped, pods frozen)",
	"crashloop": "OOM-style crash loop (3 crashes)",
}

func main() {
	out := flag.String("out", "", "file to write (default stdout)")
	command := flag.String("command", "make bench-e2e", "the command that produced the runs")
	republish := flag.String("republish", "", "rebuild the tables of this published file from the raw runs it holds (date, commit and machine kept)")
	flag.Parse()
	if *republish != "" {
		if err := republishFile(*republish); err != nil {
			log.Fatal(err)
		}
		return
	}
	if flag.NArg() == 0 {
		log.Fatal("usage: e2e [-out file] [-command cmd] run.json...")
	}
	var runs []benchfmt.E2ERun
	env := envelope{Kind: "e2e", Date: time.Now().UTC().Format(time.RFC3339), Command: *command}
	for _, path := range flag.Args() {
		b, err := os.ReadFile(path)
		if err != nil {
			log.Fatal(err)
		}
		var r benchfmt.E2ERun
		if err := json.Unmarshal(b, &r); err != nil {
			log.Fatalf("%s: %v", path, err)
		}
		runs = append(runs, r)
		env.Runs = append(env.Runs, b)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Started.Before(runs[j].Started) })
	if c, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		env.Commit = strings.TrimSpace(string(c))
	}
	env.Machine = benchfmt.MachineFacts()
	env.Machine.LoadBefore, env.Machine.LoadAfter = benchfmt.Load3(runs[0].LoadBefore), benchfmt.Load3(runs[len(runs)-1].LoadAfter)
	env.Tables = tables(runs)
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	b = append(b, '\n')
	if *out == "" {
		_, _ = os.Stdout.Write(b)
		return
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		log.Fatal(err)
	}
	for _, t := range env.Tables {
		fmt.Printf("%s\n%s\n", t.Title, markdown(t))
	}
}

type key struct{ scenario, setup string }

func tables(runs []benchfmt.E2ERun) []benchfmt.Table {
	byKey := map[key][]benchfmt.E2EScenario{}
	var order []key
	for _, r := range runs {
		for _, res := range r.Results {
			k := key{res.Scenario, res.Setup}
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], res)
		}
	}
	loads := make([]string, 0, len(runs))
	wall := make([]string, 0, len(runs))
	for i, r := range runs {
		loads = append(loads, fmt.Sprintf("run %d: %v → %v", i+1, r.LoadBefore, r.LoadAfter))
		wall = append(wall, (time.Duration(r.WallSeconds) * time.Second).String())
	}
	common := []string{
		fmt.Sprintf("%d runs; each cell is the median, (min–max) the spread over the runs. Wall time of a run: %s.", len(runs), strings.Join(wall, ", ")),
		"Load average (1, 5, 15 min) before → after each run: " + strings.Join(loads, "; ") +
			". This is a shared 2-core machine under other work: figures are from a loaded machine, not a quiet one.",
		"All setups run at the same time on the same single-node cluster, each with its own 3 replicas " +
			"and its own two callers (50 req/s each, round robin over what the setup's discovery source " +
			"lists; 2 s timeout). Requests counts the plain caller's requests sent.",
	}
	rollout := benchfmt.Table{ID: "e2e-rollout", Title: "Graceful rolling update under load (3 replicas, maxSurge 1)",
		Columns: []string{"setup", "requests", "failed", "failed, retry once", "reached a pod after its SIGTERM"},
		Notes: append(common,
			"After its SIGTERM a pod still serves for 5 s in every setup (registrar's drain, the "+
				"EndpointSlice preStop sleep, the TTL app's shutdown grace after it deregistered), so a request "+
				"that reaches it then succeeds.")}
	failures := benchfmt.Table{ID: "e2e-failures", Title: "Failures under load",
		Columns: []string{"scenario", "setup", "failed", "failed, retry once",
			"fault → caller stops picking the address", "fault → last failed request", "back after recovery"},
		Notes: append(common,
			"fault → caller stops picking: from the fault to the first moment the address left the caller's "+
				"list (exact, from the caller's watch events); 'never' when it stayed listed until it answered "+
				"again. For the lost node it is the last of the 3 addresses.",
			"fault → last failed request: from the fault to the plain caller's last failed request to that "+
				"address: how long callers kept meeting the fault, whichever way it ended (exclusion or "+
				"recovery).",
			"back after recovery: runs in which the address was listed again and answered after the fault "+
				"was over, and the median time from the fault (a lost node is restored once every setup has "+
				"dropped it, or after 150 s).",
			"Lost node: all 3 replicas run on the one node, so after exclusion every setup has no address "+
				"left to send to until the node returns; those requests are not sent and not counted as failed "+
				"(no_target in the raw runs).")}
	for _, k := range order {
		rs := byKey[k]
		f := spread(rs, func(r benchfmt.E2EScenario) (float64, bool) { return float64(r.Failed), true }, "%.0f")
		fr := spread(rs, func(r benchfmt.E2EScenario) (float64, bool) { return float64(r.RetryFailed), true }, "%.0f")
		if k.scenario == scenarioRollout {
			req := spread(rs, func(r benchfmt.E2EScenario) (float64, bool) { return float64(r.Requests), true }, "%.0f")
			as := spread(rs, func(r benchfmt.E2EScenario) (float64, bool) { return float64(r.AfterSigterm), true }, "%.0f")
			rollout.Rows = append(rollout.Rows, []string{rs[0].SetupName, req, f, fr, as})
			continue
		}
		excl := spread(rs, func(r benchfmt.E2EScenario) (float64, bool) {
			if r.ExclusionMS == nil {
				return 0, false
			}
			return float64(*r.ExclusionMS) / 1000, true
		}, "%.1f s")
		lastFail := spread(rs, func(r benchfmt.E2EScenario) (float64, bool) {
			if r.LastFailMS == nil {
				return 0, false
			}
			return float64(*r.LastFailMS) / 1000, true
		}, "%.1f s")
		back := 0
		for _, r := range rs {
			if r.CameBack {
				back++
			}
		}
		backAt := spread(rs, func(r benchfmt.E2EScenario) (float64, bool) {
			if !r.CameBack || r.BackMS == nil {
				return 0, false
			}
			return float64(*r.BackMS) / 1000, true
		}, "%.0f s")
		name := scenarioNames[k.scenario]
		if name == "" {
			name = k.scenario
		}
		failures.Rows = append(failures.Rows, []string{name, rs[0].SetupName, f, fr, excl, lastFail,
			fmt.Sprintf("%d/%d runs, %s", back, len(rs), backAt)})
	}
	failures.Notes = append(failures.Notes, noise(order, byKey)...)
	return []benchfmt.Table{rollout, failures, headline(order, byKey, len(runs))}
}

// headlineSetups are the README matrix's columns, in order.
var headlineSetups = []struct{ id, name string }{
	{setupRegistrar, "registrar"},
	{"endpointslice", "EndpointSlice + preStop"},
	{"ttl", "TTL 15 s, deregister on SIGTERM"},
	{"ttl-eureka", "TTL, Eureka defaults"},
}

// headline is the compact matrix for the README: one row per scenario, one column per setup,
// each cell the median failed requests of the plain caller and the median time from the fault
// until the caller stopped picking the address ("listed" when it never did).
func headline(order []key, byKey map[key][]benchfmt.E2EScenario, runs int) benchfmt.Table {
	t := benchfmt.Table{ID: "e2e-headline", Title: "Failed requests (plain caller) and fault → address no longer picked, medians",
		Columns: []string{"scenario"},
		Notes:   []string{fmt.Sprintf("Medians of %d runs; spreads, the retry-once caller and the recovery columns are in docs/e2e.md.", runs)}}
	for _, s := range headlineSetups {
		t.Columns = append(t.Columns, s.name)
	}
	var scenarios []string
	seen := map[string]bool{}
	for _, k := range order {
		if !seen[k.scenario] {
			seen[k.scenario] = true
			scenarios = append(scenarios, k.scenario)
		}
	}
	for _, sc := range scenarios {
		name := scenarioNames[sc]
		if sc == scenarioRollout {
			name = "graceful rolling update"
		}
		if name == "" {
			name = sc
		}
		row := []string{name}
		for _, s := range headlineSetups {
			rs := byKey[key{sc, s.id}]
			if len(rs) == 0 {
				row = append(row, "–")
				continue
			}
			f := median(rs, func(r benchfmt.E2EScenario) (float64, bool) { return float64(r.Failed), true })
			cell := fmt.Sprintf("%.0f failed", f)
			if sc != scenarioRollout {
				ex := median(rs, func(r benchfmt.E2EScenario) (float64, bool) {
					if r.ExclusionMS == nil {
						return 0, false
					}
					return float64(*r.ExclusionMS) / 1000, true
				})
				if ex < 0 {
					cell += ", stays listed"
				} else {
					cell += fmt.Sprintf(", %.1f s", ex)
				}
			}
			row = append(row, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// median of the values get reports for rs; -1 when fewer than half of the runs have one
// (the address stayed listed in most runs).
func median(rs []benchfmt.E2EScenario, get func(benchfmt.E2EScenario) (float64, bool)) float64 {
	var xs []float64
	for _, r := range rs {
		if v, ok := get(r); ok {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 || 2*len(xs) < len(rs) {
		return -1
	}
	sort.Float64s(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// republishFile rebuilds the tables of a published file from the raw runs it holds.
func republishFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	runs := make([]benchfmt.E2ERun, 0, len(env.Runs))
	for i, raw := range env.Runs {
		var r benchfmt.E2ERun
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("%s: run %d: %w", path, i+1, err)
		}
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Started.Before(runs[j].Started) })
	env.Tables = tables(runs)
	out, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}

// noise says, per failure scenario, which setups' failed-request counts overlap registrar's
// over the runs (min–max ranges intersect): those differences are within noise.
func noise(order []key, byKey map[key][]benchfmt.E2EScenario) []string {
	var notes []string
	for _, k := range order {
		if k.setup != setupRegistrar || k.scenario == scenarioRollout {
			continue
		}
		rlo, rhi := minMax(byKey[k])
		var same, differ []string
		for _, o := range order {
			if o.scenario != k.scenario || o.setup == setupRegistrar {
				continue
			}
			lo, hi := minMax(byKey[o])
			if lo <= rhi && rlo <= hi {
				same = append(same, o.setup)
			} else {
				differ = append(differ, o.setup)
			}
		}
		name := scenarioNames[k.scenario]
		if name == "" {
			name = k.scenario
		}
		notes = append(notes, fmt.Sprintf("%s, failed requests (plain caller): within noise of registrar (ranges overlap): %s; outside it: %s.",
			name, orNone(same), orNone(differ)))
	}
	return notes
}

func minMax(rs []benchfmt.E2EScenario) (float64, float64) {
	lo, hi := float64(rs[0].Failed), float64(rs[0].Failed)
	for _, r := range rs {
		lo, hi = min(lo, float64(r.Failed)), max(hi, float64(r.Failed))
	}
	return lo, hi
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// spread renders the median and (min–max) of the values get yields; runs where get says
// false are counted as "never".
func spread(rs []benchfmt.E2EScenario, get func(benchfmt.E2EScenario) (float64, bool), format string) string {
	var vs []float64
	never := 0
	for _, r := range rs {
		if v, ok := get(r); ok {
			vs = append(vs, v)
		} else {
			never++
		}
	}
	if len(vs) == 0 {
		return "never"
	}
	sort.Float64s(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	s := fmt.Sprintf(format, med)
	if len(vs) > 1 {
		s += fmt.Sprintf(" ("+strings.TrimSuffix(format, " s")+"–"+format+")", vs[0], vs[len(vs)-1])
	}
	if never > 0 {
		s += fmt.Sprintf("; never in %d/%d runs", never, len(rs))
	}
	return s
}

func markdown(t benchfmt.Table) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.Columns, " | ") + " |\n|")
	for range t.Columns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}
