package controlplane

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// Publication is what a published configuration's runs are committed as (docs/bench/*.json):
// the shared envelope (kind, date, commit, command, machine, raw runs, rendered tables) that
// bench/benchdoc turns into the tables of the docs.
type Publication struct {
	benchfmt.Envelope[*Results]
	// Noise says which registrar/peer pairs are within noise of each other.
	Noise []string `json:"noise"`
}

// Spread is the median and range of one figure over the runs.
type Spread struct {
	Median, Min, Max float64
	N                int
}

// spreadOf summarises values (NaN ones, from runs without the figure, are left out).
func spreadOf(values []float64) Spread {
	var v []float64
	for _, x := range values {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Spread{Median: med, Min: v[0], Max: v[len(v)-1], N: len(v)}
}

// Overlaps reports whether two figures' ranges over the runs overlap: then the difference
// between them is within the noise of these runs.
func (s Spread) Overlaps(o Spread) bool {
	return s.N > 0 && o.N > 0 && s.Min <= o.Max && o.Min <= s.Max
}

// cell formats a spread: "median (min–max)", or just the value for one run.
func (s Spread) cell(format string) string {
	if s.N == 0 {
		return "-"
	}
	if s.N == 1 || s.Min == s.Max {
		return fmt.Sprintf(format, s.Median)
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", s.Median, s.Min, s.Max)
}

// figure reads one figure of a system from each run.
func figure(runs []*Results, system string, get func(SystemResult) float64) Spread {
	var v []float64
	for _, r := range runs {
		s, ok := r.System(system)
		if !ok {
			v = append(v, math.NaN())
			continue
		}
		v = append(v, get(s))
	}
	return spreadOf(v)
}

type lagFigure struct {
	label string
	get   func(SystemResult) float64
}

var lagFigures = []lagFigure{
	{"deregistration p50 (ms)", func(s SystemResult) float64 { return s.Deregistration.P50 }},
	{"deregistration p99 (ms)", func(s SystemResult) float64 { return s.Deregistration.P99 }},
	{"registration p50 (ms)", func(s SystemResult) float64 { return s.Registration.P50 }},
	{"registration p99 (ms)", func(s SystemResult) float64 { return s.Registration.P99 }},
}

// Publish builds the envelope of runs: a lag table (median and range of each figure per
// system), a table of ratios to registrar with a within-noise verdict, and notes.
func Publish(kind, tableID, command, commit string, runs []*Results) *Publication {
	p := &Publication{Envelope: benchfmt.Envelope[*Results]{Kind: kind, Date: time.Now().UTC().Format(time.RFC3339), Commit: commit, Command: command, Runs: runs}}
	if len(runs) == 0 {
		return p
	}
	p.Machine = runs[0].Machine
	p.Machine.LoadAfter = runs[len(runs)-1].Machine.LoadAfter
	var systems []string
	for _, name := range systemOrder {
		if diagnostic(name) {
			continue // diagnostics of the harness: in the raw runs and the harness table
		}
		if _, ok := runs[0].System(name); ok {
			systems = append(systems, name)
		}
	}
	lag := benchfmt.Table{ID: tableID, Title: fmt.Sprintf("%s: lag from the API write to the change seen by a separate watcher, median (min–max) of %d runs",
		command, len(runs)),
		Columns: append([]string{""}, systems...)}
	for _, f := range lagFigures {
		row := []string{f.label}
		for _, sys := range systems {
			row = append(row, figure(runs, sys, f.get).cell("%.0f"))
		}
		lag.Rows = append(lag.Rows, row)
	}
	row := []string{"lost / unexpected (sum)"}
	for _, sys := range systems {
		lost, unexp := 0, 0
		for _, r := range runs {
			s, _ := r.System(sys)
			lost += s.Lost
			unexp += s.Unexpected
		}
		row = append(row, fmt.Sprintf("%d / %d", lost, unexp))
	}
	lag.Rows = append(lag.Rows, row)
	if unmeasured := sumOver(runs, systems, func(s SystemResult) int { return s.Unmeasured }); unmeasured != nil {
		lag.Rows = append(lag.Rows, append([]string{"unmeasured: shown in a watch gap (sum)"}, unmeasured...))
	}
	row = []string{"writes per transition"}
	for _, sys := range systems {
		if sys == SystemAPIWatch {
			row = append(row, "-")
			continue
		}
		row = append(row, figure(runs, sys, func(s SystemResult) float64 { return s.WritesPerTransition }).cell("%.2f"))
	}
	lag.Rows = append(lag.Rows, row)
	row = []string{"CPU s, measured phase"}
	for _, sys := range systems {
		row = append(row, usageSpread(runs, func(r *Results) (float64, bool) { v, ok := r.MeasuredCPUSeconds[sys]; return v, ok }).cell("%.1f"))
	}
	lag.Rows = append(lag.Rows, row)
	row = []string{"peak RSS (MiB)"}
	for _, sys := range systems {
		row = append(row, usageSpread(runs, func(r *Results) (float64, bool) { u, ok := r.Usage[sys]; return u.PeakRSSMiB, ok }).cell("%.0f"))
	}
	lag.Rows = append(lag.Rows, row)
	lag.Notes = append(lag.Notes, p.harnessNotes()...)

	ratio := benchfmt.Table{ID: tableID + "-ratios", Title: fmt.Sprintf("%s: each system against registrar (its median over registrar's median, %d runs); "+
		"figures whose ranges over the runs overlap are within noise", command, len(runs)),
		Columns: []string{"system"}}
	for _, f := range lagFigures {
		ratio.Columns = append(ratio.Columns, f.label, "vs registrar")
	}
	for _, sys := range systems {
		cells := []string{sys}
		for _, f := range lagFigures {
			s := figure(runs, sys, f.get)
			reg := figure(runs, SystemRegistrar, f.get)
			cells = append(cells, s.cell("%.0f"))
			switch {
			case sys == SystemRegistrar:
				cells = append(cells, "-")
			case s.Overlaps(reg):
				cells = append(cells, fmt.Sprintf("%s, within noise", times(s.Median/reg.Median)))
				p.Noise = append(p.Noise, fmt.Sprintf("%s %s: %s and registrar are within noise (%s vs %s)",
					sys, strings.TrimSuffix(f.label, " (ms)"), sys, s.cell("%.0f"), reg.cell("%.0f")))
			default:
				cells = append(cells, times(s.Median/reg.Median))
			}
		}
		ratio.Rows = append(ratio.Rows, cells)
	}
	ratio.Notes = []string{"\"within noise\": the two figures' min–max ranges over the runs overlap, so these runs do not tell them apart"}
	p.Tables = []benchfmt.Table{lag, ratio, harnessTable(tableID, command, runs)}
	return p
}

// sumOver is, per system, the sum of a count over the runs; nil when it is zero everywhere.
func sumOver(runs []*Results, systems []string, get func(SystemResult) int) []string {
	out := make([]string, 0, len(systems))
	nonzero := false
	for _, sys := range systems {
		n := 0
		for _, r := range runs {
			if s, ok := r.System(sys); ok {
				n += get(s)
			}
		}
		nonzero = nonzero || n > 0
		out = append(out, fmt.Sprint(n))
	}
	if !nonzero {
		return nil
	}
	return out
}

// harnessTable is one row per run of what could make the floor move: the same pod watch from
// the watcher process, from the harness on its own connection and on the writers' connection;
// the achieved rate and the writers' lateness; the processes' scheduling lag; other load.
func harnessTable(tableID, command string, runs []*Results) benchfmt.Table {
	t := benchfmt.Table{ID: tableID + "-harness",
		Title: fmt.Sprintf("%s: the floor and the harness, per run (dereg / reg p99 in ms)", command),
		Columns: []string{"run", "apiwatch (watcher process)", "apiwatch-inproc (harness, own connection)", "apiwatch-shared (harness, writers' connection)",
			"writes/s achieved", "writes sent late p99 (ms)", "API write p99 (ms)", "sleep late p99 harness / watcher (ms)", "other processes (cores)",
			"load before → after"}}
	for i, r := range runs {
		p99 := func(sys string) string {
			s, ok := r.System(sys)
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.0f / %.0f", s.Deregistration.P99, s.Registration.P99)
		}
		other := "-"
		if r.Harness.MeasuredSeconds > 0 {
			other = fmt.Sprintf("%.2f", r.Harness.OtherCPUSeconds/r.Harness.MeasuredSeconds)
		}
		t.Rows = append(t.Rows, []string{fmt.Sprint(i + 1), p99(SystemAPIWatch), p99(SystemAPIWatchInProc), p99(SystemAPIWatchShared),
			fmt.Sprintf("%.0f of %.0f", r.WriteRate, r.OfferedRate), fmt.Sprintf("%.0f", r.Harness.PaceLag.P99), fmt.Sprintf("%.0f", r.Harness.WriteRTT.P99),
			fmt.Sprintf("%.0f / %.0f", r.Harness.SchedLag.P99, r.Harness.WatcherSchedLag.P99), other,
			fmt.Sprintf("%.1f → %.1f", r.Machine.LoadBefore[0], r.Machine.LoadAfter[0])})
	}
	t.Notes = []string{"apiwatch-inproc and apiwatch-shared are diagnostics, not peers: the same pod watch as apiwatch, run inside the harness process " +
		"(the old harness timed its floor and the EndpointSlices on the writers' connection)",
		"other processes: CPU the rest of the shared machine used during the measured phase (machine busy time minus this run's processes), in cores"}
	return t
}

func times(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "-"
	case x >= 10:
		return fmt.Sprintf("%.0f×", x)
	case x < 1:
		return fmt.Sprintf("%.2f×", x)
	default:
		return fmt.Sprintf("%.1f×", x)
	}
}

func usageSpread(runs []*Results, get func(*Results) (float64, bool)) Spread {
	var v []float64
	for _, r := range runs {
		if x, ok := get(r); ok {
			v = append(v, x)
		} else {
			v = append(v, math.NaN())
		}
	}
	return spreadOf(v)
}

// harnessNotes state the conditions of the runs: workers, achieved rate, the harness's own
// lag, the machine's load, and every warning.
func (p *Publication) harnessNotes() []string {
	rates := make([]string, 0, len(p.Runs))
	loads := make([]string, 0, len(p.Runs))
	hl := make([]string, 0, len(p.Runs))
	wl := make([]string, 0, len(p.Runs))
	other := make([]string, 0, len(p.Runs))
	for _, r := range p.Runs {
		rates = append(rates, fmt.Sprintf("%.0f", r.WriteRate))
		loads = append(loads, fmt.Sprintf("%.1f→%.1f", r.Machine.LoadBefore[0], r.Machine.LoadAfter[0]))
		hl = append(hl, fmt.Sprintf("%.0f", r.Harness.PaceLag.P99))
		wl = append(wl, fmt.Sprintf("%.0f", r.Harness.WatcherSchedLag.P99))
		other = append(other, fmt.Sprintf("%.0f", r.Harness.OtherCPUSeconds))
	}
	r0 := p.Runs[0]
	n := []string{
		fmt.Sprintf("%d pods, %d ServiceRegistries, offered %.0f transitions/s; achieved per run: %s/s",
			r0.Pods, r0.Registries, r0.OfferedRate, strings.Join(rates, ", ")),
		fmt.Sprintf("workers: registrar %d reconcilers, kube-controller-manager %d EndpointSlice syncs",
			r0.Workers[SystemRegistrar], r0.Workers[SystemEndpointSlice]),
		fmt.Sprintf("harness: writes sent late p99 per run %s ms; watcher process 10 ms sleep late p99 %s ms", strings.Join(hl, ", "), strings.Join(wl, ", ")),
		fmt.Sprintf("shared %d-core machine: 1-min load average before→after per run %s; CPU seconds used by other processes in each measured phase %s",
			r0.Machine.Cores, strings.Join(loads, ", "), strings.Join(other, ", ")),
	}
	for i, r := range p.Runs {
		for _, w := range r.Warnings {
			n = append(n, fmt.Sprintf("run %d: %s", i+1, w))
		}
	}
	return n
}

// WriteJSON writes the publication to path.
func (p *Publication) WriteJSON(path string) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode publication: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteSummary prints the tables and the noise verdicts.
func (p *Publication) WriteSummary(out io.Writer) {
	for _, t := range p.Tables {
		fmt.Fprintf(out, "\n%s\n", t.Title)
		fmt.Fprintln(out, strings.Join(t.Columns, " | "))
		for _, r := range t.Rows {
			fmt.Fprintln(out, strings.Join(r, " | "))
		}
		for _, n := range t.Notes {
			fmt.Fprintf(out, "note: %s\n", n)
		}
	}
	if len(p.Noise) == 0 {
		fmt.Fprintln(out, "within noise: no peer's p99 range overlaps registrar's")
	}
	for _, n := range p.Noise {
		fmt.Fprintf(out, "within noise: %s\n", n)
	}
}
