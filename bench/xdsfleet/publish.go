package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// The targets (issue 39), checked at the largest client count and 10 changes/s.
const (
	targetP99Ms   = 1000 // p99 change → every subscribed client ACKed
	targetPeakMiB = 1024 // the server's peak RSS
	targetFactor  = 2    // at least this much better than the stock server on p99 and on memory
)

// publishRuns writes the runs as one benchfmt envelope of kind "bench-xds-fleet" with its table
// (bench/benchdoc renders it into docs/xds.md, <!-- bench:bench-xds-fleet -->).
func publishRuns(paths []string, out, command string) error {
	if len(paths) == 0 || out == "" {
		return errors.New("-publish needs -out and at least one run file")
	}
	runs := make([]Run, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var r Run
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		runs = append(runs, r)
	}
	m := benchfmt.MachineFacts()
	m.LoadBefore, m.LoadAfter = runs[0].LoadBefore, runs[len(runs)-1].LoadAfter
	env := benchfmt.Envelope[Run]{
		Kind: "bench-xds-fleet", Date: time.Now().UTC().Format(time.RFC3339), Commit: commit(), Command: command,
		Machine: m, Runs: runs, Tables: []benchfmt.Table{fleetTable(runs)},
	}
	for _, row := range env.Tables[0].Rows {
		fmt.Println(strings.Join(row, " | "))
	}
	for _, n := range env.Tables[0].Notes {
		fmt.Println("-", n)
	}
	return writeJSON(out, env)
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

type group struct {
	clients int
	rate    float64
	impl    string
}

// stat is the median and range of one figure over the runs of a group.
type stat struct{ median, lo, hi float64 }

func over(runs []Run, f func(Run) float64) stat {
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

func (s stat) String() string { return s.fmt(0) }

func (s stat) fmt(decimals int) string {
	if s.lo == s.hi {
		return fmt.Sprintf("%.*f", decimals, s.median)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", decimals, s.median, decimals, s.lo, decimals, s.hi)
}

func fleetTable(runs []Run) benchfmt.Table {
	by := map[group][]Run{}
	var keys []group
	for _, r := range runs {
		g := group{r.Config.Clients, r.Config.Rate, r.Config.Impl}
		if _, ok := by[g]; !ok {
			keys = append(keys, g)
		}
		by[g] = append(by[g], r)
	}
	slices.SortFunc(keys, func(a, b group) int {
		switch {
		case a.clients != b.clients:
			return a.clients - b.clients
		case a.rate != b.rate:
			if a.rate < b.rate {
				return -1
			}
			return 1
		default:
			return strings.Compare(a.impl, b.impl)
		}
	})
	t := benchfmt.Table{
		ID:    "bench-xds-fleet",
		Title: "xDS at fleet scale: registrar's server and go-control-plane's stock server, same clients, same resources, same machine",
		Columns: []string{"clients", "changes/s", "server", "runs", "change → all ACKed p50 ms", "p99 ms", "KiB sent per change",
			"server CPU ms per change", "server peak RSS MiB", "behind / undelivered / stream errors", "initial sync s"},
	}
	for _, g := range keys {
		rs := by[g]
		name := g.impl
		if name == implStock {
			name = "go-control-plane (LinearCache)"
		}
		t.Rows = append(t.Rows, []string{
			fmt.Sprint(g.clients), fmt.Sprint(g.rate), name, fmt.Sprint(len(rs)),
			over(rs, func(r Run) float64 { return r.P50Ms }).fmt(1),
			over(rs, func(r Run) float64 { return r.P99Ms }).fmt(1),
			over(rs, func(r Run) float64 { return r.KiBChange }).fmt(1),
			over(rs, func(r Run) float64 { return r.CPUMsChange }).fmt(2),
			over(rs, func(r Run) float64 { return r.PeakMiB }).String(),
			fmt.Sprintf("%s / %s / %s", over(rs, func(r Run) float64 { return float64(r.Behind) }),
				over(rs, func(r Run) float64 { return float64(r.Undelivered) }), over(rs, func(r Run) float64 { return float64(r.Errors) })),
			over(rs, func(r Run) float64 { return r.SyncSeconds }).fmt(1),
		})
	}
	r0 := runs[0].Config
	t.Notes = append(t.Notes, fmt.Sprintf("%d services, %d endpoints; clients subscribe to %d services each (%d to every service), "+
		"%.0f %% of them delta xDS; medians (min–max) of the runs.", r0.Services, r0.Endpoints, r0.PerClient, r0.Everything, r0.DeltaShare*100))
	t.Notes = append(t.Notes, "A change starts when the server's publish returns; the API watch and reconcile before it are make bench-xds's and the sweep's.")
	t.Notes = append(t.Notes, targets(by, keys)...)
	return t
}

// targets states the targets met or missed at the largest client count, 10 changes/s.
func targets(by map[group][]Run, keys []group) []string {
	most := 0
	for _, k := range keys {
		most = max(most, k.clients)
	}
	reg, okR := by[group{most, 10, implRegistrar}]
	stock, okS := by[group{most, 10, implStock}]
	if !okR {
		return []string{fmt.Sprintf("Targets: no registrar run at %d clients and 10 changes/s.", most)}
	}
	p99 := over(reg, func(r Run) float64 { return r.P99Ms }).median
	peak := over(reg, func(r Run) float64 { return r.PeakMiB }).median
	out := []string{
		fmt.Sprintf("Target p99 ≤ %d ms at %d clients, 10 changes/s: %.0f ms, %s.", targetP99Ms, most, p99, verdict(p99 <= targetP99Ms)),
		fmt.Sprintf("Target peak RSS ≤ %d MiB: %.0f MiB, %s.", targetPeakMiB, peak, verdict(peak <= targetPeakMiB)),
	}
	if okS {
		sp99 := over(stock, func(r Run) float64 { return r.P99Ms }).median
		speak := over(stock, func(r Run) float64 { return r.PeakMiB }).median
		out = append(out,
			fmt.Sprintf("Target ≥ %d× the stock server on p99: %.1f×, %s; on memory: %.1f×, %s.", targetFactor,
				ratio(sp99, p99), verdict(ratio(sp99, p99) >= targetFactor), ratio(speak, peak), verdict(ratio(speak, peak) >= targetFactor)))
	}
	return out
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}
