// Command xds publishes the runs of the xDS benchmark (test/xds/bench_test.go, one
// benchfmt.XDSRun JSON file per run) as one benchfmt envelope of kind "bench-xds": the runs,
// the machine, and the table (median and min–max over the runs, the two targets met
// or missed) that bench/benchdoc renders into docs/xds.md (<!-- bench:bench-xds -->).
// `make bench-xds` runs it.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// TargetOverFloorMs is the target: the p99 from the API write to the ACK of all
// clients at most this much above the API watch floor's p99 of the same run.
const TargetOverFloorMs = 100

func main() {
	out := flag.String("out", "docs/bench/xds.json", "Where to write the envelope.")
	command := flag.String("command", "make bench-xds", "The command that produced the runs.")
	flag.Parse()
	if err := run(flag.Args(), *out, *command); err != nil {
		fmt.Fprintln(os.Stderr, "xds:", err)
		os.Exit(1)
	}
}

func run(paths []string, out, command string) error {
	if len(paths) == 0 {
		return errors.New("no run files given")
	}
	runs := make([]benchfmt.XDSRun, 0, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read run: %w", err)
		}
		var r benchfmt.XDSRun
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		runs = append(runs, r)
	}
	env := envelope(runs, command, benchfmt.MachineFacts())
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	for _, row := range env.Tables[0].Rows {
		fmt.Println(strings.Join(row, " | "))
	}
	for _, n := range env.Tables[0].Notes {
		fmt.Println("-", n)
	}
	return nil
}

// envelope wraps runs (at least one) with the machine's facts and the table.
func envelope(runs []benchfmt.XDSRun, command string, m benchfmt.Machine) benchfmt.Envelope[benchfmt.XDSRun] {
	m.LoadBefore, m.LoadAfter = runs[0].LoadBefore, runs[len(runs)-1].LoadAfter
	var commits []string
	for _, r := range runs {
		if !slices.Contains(commits, r.Commit) {
			commits = append(commits, r.Commit)
		}
	}
	return benchfmt.Envelope[benchfmt.XDSRun]{
		Kind: "bench-xds", Date: runs[len(runs)-1].Finished.UTC().Format(time.RFC3339), Commit: strings.Join(commits, ","),
		Command: command, Machine: m, Runs: runs, Tables: []benchfmt.Table{table(runs)},
	}
}

// stat is the median and range of one figure over the runs.
type stat struct{ median, lo, hi float64 }

func over(runs []benchfmt.XDSRun, f func(benchfmt.XDSRun) float64) stat {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return stat{med, v[0], v[len(v)-1]}
}

func (s stat) format(decimals int) (string, string) {
	f := func(x float64) string { return fmt.Sprintf("%.*f", decimals, x) }
	return f(s.median), f(s.lo) + " – " + f(s.hi)
}

// row is a figure: its median and range over the runs.
func row(label string, runs []benchfmt.XDSRun, decimals int, f func(benchfmt.XDSRun) float64) []string {
	m, r := over(runs, f).format(decimals)
	return []string{label, m, r}
}

// lagRow is a stage's p50 and p99: medians, and the range of the p99.
func lagRow(label string, runs []benchfmt.XDSRun, f func(benchfmt.XDSRun) benchfmt.XDSLag) []string {
	p50 := over(runs, func(r benchfmt.XDSRun) float64 { return f(r).P50 })
	p99 := over(runs, func(r benchfmt.XDSRun) float64 { return f(r).P99 })
	return []string{label, fmt.Sprintf("%.0f / %.0f", p50.median, p99.median), fmt.Sprintf("p99 %.0f – %.0f", p99.lo, p99.hi)}
}

// OneCLAPerChange: every client received exactly one ClusterLoadAssignment per change (the
// load generator changes only idle registries, so each is a changed registry in one push)
// and none it already had.
func OneCLAPerChange(r benchfmt.XDSRun) bool {
	return r.Changes > 0 && r.CLAs == r.Changes*r.Clients && r.RedundantCLAs == 0
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func table(runs []benchfmt.XDSRun) benchfmt.Table {
	n := len(runs)
	busy, one := 0, 0
	for _, r := range runs {
		if r.Busy {
			busy++
		}
		if OneCLAPerChange(r) {
			one++
		}
	}
	overFloor := over(runs, func(r benchfmt.XDSRun) float64 { return r.P99OverFloor })
	r0 := runs[0]
	rows := [][]string{
		row(fmt.Sprintf("changes/s achieved (offered %.0f, each on a registry with no change in flight)", r0.TargetRate), runs, 1,
			func(r benchfmt.XDSRun) float64 { return r.AchievedRate }),
		lagRow("API watch floor: write → a plain watch sees it, p50 / p99 ms", runs, func(r benchfmt.XDSRun) benchfmt.XDSLag { return r.Floor }),
		lagRow("write → the operator's pod informer sees it", runs, func(r benchfmt.XDSRun) benchfmt.XDSLag { return r.OperatorSaw }),
		lagRow("write → ClusterLoadAssignment in the xDS cache", runs, func(r benchfmt.XDSRun) benchfmt.XDSLag { return r.CacheSet }),
		lagRow("write → the first client's ACK", runs, func(r benchfmt.XDSRun) benchfmt.XDSLag { return r.FirstAck }),
		lagRow(fmt.Sprintf("write → all %d clients' ACK", r0.Clients), runs, func(r benchfmt.XDSRun) benchfmt.XDSLag { return r.AllAcks }),
		lagRow("all clients' ACK − the floor's event, per change", runs, func(r benchfmt.XDSRun) benchfmt.XDSLag { return r.OverFloor }),
		row(fmt.Sprintf("**p99 all-ACK − p99 floor, ms (target ≤ %d)**", TargetOverFloorMs), runs, 0,
			func(r benchfmt.XDSRun) float64 { return r.P99OverFloor }),
		row("EDS pushes (responses) per change per client", runs, 2, func(r benchfmt.XDSRun) float64 { return r.ResponsesPerChange }),
		row("**ClusterLoadAssignments per change per client (target exactly 1)**", runs, 3,
			func(r benchfmt.XDSRun) float64 { return r.CLAsPerChange }),
		row("ClusterLoadAssignments the client already had (redundant)", runs, 0,
			func(r benchfmt.XDSRun) float64 { return float64(r.RedundantCLAs) }),
		row("ClusterLoadAssignments per push", runs, 2, func(r benchfmt.XDSRun) float64 { return r.CLAsPerResponse }),
		row("bytes per push", runs, 0, func(r benchfmt.XDSRun) float64 { return r.BytesPerResponse }),
		row("bytes per ClusterLoadAssignment", runs, 0, func(r benchfmt.XDSRun) float64 { return r.BytesPerCLA }),
		row("CPU cores: operator (test process, with the load generator and the floor's watch)", runs, 2,
			func(r benchfmt.XDSRun) float64 { return r.CPUCores.Operator }),
		row("CPU cores: kube-apiserver and its etcd", runs, 2, func(r benchfmt.XDSRun) float64 { return r.CPUCores.APIServer }),
		row("CPU cores: the store's etcd", runs, 2, func(r benchfmt.XDSRun) float64 { return r.CPUCores.Store }),
		row(fmt.Sprintf("CPU cores: the %d clients (their own process)", r0.Clients), runs, 2,
			func(r benchfmt.XDSRun) float64 { return r.CPUCores.Clients }),
		row("CPU cores: other processes on the machine", runs, 2, func(r benchfmt.XDSRun) float64 { return r.CPUCores.Other }),
	}
	notes := []string{
		fmt.Sprintf("Target p99 write → all clients' ACK ≤ %d ms above the API watch floor of the same run: **%s** (median %.0f ms over %d runs).",
			TargetOverFloorMs, verdict(overFloor.median <= TargetOverFloorMs), overFloor.median, n),
		fmt.Sprintf("Target exactly one ClusterLoadAssignment per changed registry per push: **%s** "+
			"(%d of %d runs: every client got one per change, none redundant).", verdict(one == n), one, n),
	}
	if busy > 0 {
		notes = append(notes, fmt.Sprintf("**Busy**: in %d of %d runs other processes used ≥ %.2f cores (read from /proc): the lags are provisional.",
			busy, n, benchfmt.BusyCores))
	} else {
		notes = append(notes, fmt.Sprintf("Quiet: in every run other processes used < %.2f cores (read from /proc).", benchfmt.BusyCores))
	}
	return benchfmt.Table{
		ID:      "bench-xds",
		Title:   fmt.Sprintf("%d ADS clients × %d registries (%d pods each), %d runs", r0.Clients, r0.Registries, r0.PodsPerRegistry, n),
		Columns: []string{"", "median", "min – max"},
		Rows:    rows,
		Notes:   notes,
	}
}
