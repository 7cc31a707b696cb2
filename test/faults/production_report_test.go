package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// scenarioRun is one seed's run of the production scenario, as committed in
// docs/bench/scenario.json (the runs of a benchfmt envelope).
type scenarioRun struct {
	Seed       uint64        `json:"seed"`
	Variant    string        `json:"variant"`
	Passed     bool          `json:"passed"`
	Sizes      scenarioSize  `json:"sizes"`
	Phases     []phaseResult `json:"phases"`
	Violations []string      `json:"violations"`
	Events     int           `json:"store_events"`
	// SetupSeconds is the start of the store, nodes, registries, operator and clients;
	// Seconds the whole run.
	SetupSeconds float64 `json:"setup_seconds"`
	Seconds      float64 `json:"seconds"`
	GOMAXPROCS   int     `json:"gomaxprocs"`
	GoVersion    string  `json:"go_version"`
}

// table is the run's per-phase table as text.
func (r scenarioRun) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-40s %8s %8s %8s %8s %8s\n", "phase", "actions", "store", "xDS", "gates", "all")
	for _, ph := range r.Phases {
		fmt.Fprintf(&b, "%-40s %7.1fs %8s %8s %8s %8s\n", ph.Name, ph.ActionSeconds, secs(ph.StoreSeconds), secs(ph.XDSSeconds),
			secs(ph.GatesSeconds), secs(ph.AllSeconds))
	}
	fmt.Fprintf(&b, "invariant violations: %d; store events recorded: %d; run %.0fs", len(r.Violations), r.Events, r.Seconds)
	return b.String()
}

// slowest is the longest time a phase took to be exact (the summary's convergence).
func (r scenarioRun) slowest() time.Duration {
	var s float64
	for _, ph := range r.Phases {
		s = max(s, ph.AllSeconds)
	}
	return time.Duration(s * float64(time.Second))
}

// note is the summary row's note: the phases that were not exact.
func (r scenarioRun) note() string {
	var bad []string
	for _, ph := range r.Phases {
		if ph.AllSeconds < 0 {
			bad = append(bad, ph.Name)
		}
	}
	if len(bad) == 0 {
		return fmt.Sprintf("%d phases, every one exact (store, xDS, gates) vs the API server", len(r.Phases))
	}
	return fmt.Sprintf("not exact within %s after: %s", phaseLimit(), strings.Join(bad, ", "))
}

// scenarioLoadBefore is the load average when the test binary started its first run.
var scenarioLoadBefore = benchfmt.LoadAvg()

// writeScenarioEnvelope writes the runs as a docs/bench envelope with the table
// "scenario" (bench/benchdoc renders it into docs/reliability.md).
func writeScenarioEnvelope(path string, runs []scenarioRun) error {
	for i := range runs {
		runs[i].GOMAXPROCS, runs[i].GoVersion = runtime.GOMAXPROCS(0), runtime.Version()
	}
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	command := os.Getenv("SCENARIO_COMMAND")
	if command == "" {
		command = "go test ./test/faults/ -run TestProductionScenario"
	}
	m := benchfmt.MachineFacts()
	m.LoadBefore, m.LoadAfter = scenarioLoadBefore, benchfmt.LoadAvg()
	cols := []string{"phase"}
	for _, r := range runs {
		cols = append(cols, fmt.Sprintf("seed %d: store / xDS / gates exact (s)", r.Seed))
	}
	var rows [][]string
	for i, ph := range runs[0].Phases {
		row := []string{ph.Name}
		for _, r := range runs {
			if i >= len(r.Phases) {
				row = append(row, "n/a")
				continue
			}
			q := r.Phases[i]
			row = append(row, fmt.Sprintf("%s / %s / %s", cell(q.StoreSeconds), cell(q.XDSSeconds), cell(q.GatesSeconds)))
		}
		rows = append(rows, row)
	}
	violations, result := []string{"invariant violations"}, []string{"result"}
	for _, r := range runs {
		violations = append(violations, fmt.Sprint(len(r.Violations)))
		if r.Passed {
			result = append(result, fmt.Sprintf("passed (%.0f s)", r.Seconds))
		} else {
			result = append(result, fmt.Sprintf("**failed** (%.0f s)", r.Seconds))
		}
	}
	rows = append(rows, violations, result)
	s := runs[0].Sizes
	env := benchfmt.Envelope[scenarioRun]{
		Kind: "scenario", Date: time.Now().UTC().Format(time.RFC3339), Commit: strings.TrimSpace(string(commit)),
		Command: command, Machine: m, Runs: runs,
		Tables: []benchfmt.Table{{
			ID: "scenario",
			Title: fmt.Sprintf("The production-shaped scenario (%s): one service of %d pods, %d services of 1–5 pods in %d namespaces, %d nodes, %d xDS clients; seconds until exact after each phase",
				runs[0].Variant, s.BigPods, s.SmallServices, s.Namespaces, s.Nodes, s.XDSClients),
			Columns: cols,
			Rows:    rows,
			Notes: []string{
				"Each cell: seconds from the phase's last API write (node Lease loss: from the Leases' lapse, 10 s after the last renewal; kill -9: from the restart, so it includes waiting out the dead leader's 4 s Lease) until the store, then every xDS client, then every readiness gate (and a refused registry's status) was exact against the API server (polled every 0.5 s after a full read, so a cell is late by up to a poll). — : not exact within the phase's limit.",
				"Operator flags: --store-batch, --store-lease-ttl=30s, --node-lease-timeout=10s (the node Lease guard at its defaults), the pod webhook (readiness gates), --xds-bind-address with raw ADS clients subscribed to every registry, leader election (4 s Lease). The invariants are the fault recorder's (docs/reliability.md), over every store event of the run.",
				fmt.Sprintf("Test binary: GOMAXPROCS %d, %s; the operator is a separate process (GOMAXPROCS = cores).", runtime.GOMAXPROCS(0), runtime.Version()),
			},
		}},
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func cell(s float64) string {
	if s < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", s)
}
