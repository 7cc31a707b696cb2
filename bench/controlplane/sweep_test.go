package controlplane

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// sweepRun is a synthetic run of size pods: CPU seconds of registrar and the EndpointSlice
// controller in the measured phase, their peak RSS, and the deregistration p99 of registrar
// and the API watch floor.
func sweepRun(pods int, regCPU, esCPU, regRSS, esRSS, regP99, floorP99 float64) *Results {
	transitions := 4 * pods
	return &Results{
		Pods: pods, Registries: pods / 10, Namespaces: 10, OfferedRate: 100,
		Systems: []SystemResult{
			{Name: SystemRegistrar, Transitions: transitions, Observed: transitions, Writes: transitions, WritesPerTransition: 1,
				Deregistration: LagStats{P99: regP99}},
			{Name: SystemEndpointSlice, Transitions: transitions, Observed: transitions, Deregistration: LagStats{P99: regP99 * 2}},
			{Name: SystemAPIWatch, Transitions: transitions, Observed: transitions, Deregistration: LagStats{P99: floorP99}},
		},
		MeasuredCPUSeconds: map[string]float64{SystemRegistrar: regCPU, SystemEndpointSlice: esCPU},
		Usage: map[string]Usage{SystemRegistrar: {PeakRSSMiB: regRSS, FileRSSMiB: regRSS / 2},
			SystemEndpointSlice: {PeakRSSMiB: esRSS, FileRSSMiB: esRSS / 2}},
		Operator:      OperatorStats{StoreTxns: transitions / 2, StoreTxnItems: transitions},
		Harness:       HarnessStats{MeasuredSeconds: float64(transitions) / 100},
		Machine:       benchfmt.Machine{Cores: 2, LoadBefore: [3]float64{1, 1, 1}, LoadAfter: [3]float64{2, 2, 2}},
		CreateSeconds: float64(pods) / 100,
	}
}

func withTails(r *Results, t *Tails) *Results { r.Tails = t; return r }

func TestPublishSweep(t *testing.T) {
	runs := []*Results{
		// Out of order, two runs at 1,000 pods: rows are by size, medians over the runs.
		sweepRun(5000, 40, 60, 90, 150, 30, 25),
		sweepRun(1000, 8, 12, 60, 80, 20, 15),
		withTails(sweepRun(1000, 10, 12, 64, 80, 22, 15), &Tails{StoreApplyP99Ms: ptr.To(4.0), StoreFsyncP99Ms: ptr.To(2.5)}),
		sweepRun(20000, 200, 240, 300, 400, 50, 30),
	}
	p := PublishSweep(KindSweep, "bench-sweep", "make bench-sweep", "abc", runs)
	if len(p.Tables) != 3 || p.Tables[0].ID != "bench-sweep" || p.Tables[1].ID != "bench-sweep-targets" || p.Tables[2].ID != "bench-sweep-tails" {
		t.Fatalf("tables = %+v, want bench-sweep, bench-sweep-targets and bench-sweep-tails", p.Tables)
	}
	tails := p.Tables[2]
	// 1,000 pods: one run has store write p99s (4 ms), the other none: the cell is that run's.
	if got, want := tails.Rows[0], []string{"1000 / 100", "+6 (+5–+7)", "-", "-", "4.0", "2.5", "-", "-"}; !slicesEqual(got, want) {
		t.Errorf("1,000-pod tails %q, want %q", got, want)
	}
	curve := p.Tables[0]
	if len(curve.Rows) != 3 {
		t.Fatalf("curve has %d rows, want one per size", len(curve.Rows))
	}
	// 1,000 pods: 4,000 transitions; registrar 8 and 10 CPU s -> 2.00 and 2.50 per 1,000.
	if got, want := curve.Rows[0][:7], []string{"1000 / 100", "2", "4000", "2.25 (2.00–2.50)", "3.00", "0.75× (0.67×–0.83×)", "62 (60–64)"}; !slicesEqual(got, want) {
		t.Errorf("1,000-pod row starts %q, want %q", got, want)
	}
	if got := curve.Rows[2][0]; got != "20000 / 2000" {
		t.Errorf("last row is %q, want 20,000 pods", got)
	}
	if got := curve.Rows[0][8]; got != "31 (30–32) / 40" {
		t.Errorf("file pages = %q", got)
	}
	if got := curve.Rows[0][12]; got != "0 / 0" {
		t.Errorf("unmeasured = %q, want 0 / 0", got)
	}
	if got := curve.Rows[0][13]; got != "50" {
		t.Errorf("store txns/s = %q, want 50 (both runs)", got)
	}
	if got := curve.Rows[0][16]; got != "1.0 → 2.0" {
		t.Errorf("load = %q", got)
	}
	for _, row := range curve.Rows {
		if len(row) != len(curve.Columns) {
			t.Errorf("row %v has %d cells for %d columns", row, len(row), len(curve.Columns))
		}
	}
	verdicts := map[string]string{}
	for _, r := range p.Tables[1].Rows {
		verdicts[r[0]+" @ "+r[1]] = r[3]
	}
	for key, want := range map[string]string{
		"CPU per transition ≤ the EndpointSlice controller's @ 1000":                       "met",
		"CPU per transition ≤ the EndpointSlice controller's @ 20000":                      "met",
		"CPU per 1,000 transitions at 20000 pods within 1.2× of 1000 pods @ 20000 vs 1000": "met", // 2.50 against 2.25: 1.11×
		"registrar peak RSS ≤ 100 MiB @ 5000":                                              "met",
		"registrar peak RSS ≤ 250 MiB @ 20000":                                             "missed",
		"deregistration p99 within 10 ms of the API watch floor @ 1000":                    "met",
		"deregistration p99 within 10 ms of the API watch floor @ 20000":                   "missed",
		"exactly one store write per transition @ 5000":                                    "met",
	} {
		if got, ok := verdicts[key]; !ok || got != want {
			t.Errorf("%s: verdict %q (present %v), want %q; all: %v", key, got, ok, want, verdicts)
		}
	}
	for k, v := range verdicts {
		if strings.HasPrefix(k, "store transactions bounded") && v != "met" {
			t.Errorf("%s: %s, want met (half a transaction per transition)", k, v)
		}
	}

	dir := t.TempDir()
	if d := os.Getenv("SWEEP_PLOT_DIR"); d != "" {
		dir = d // to look at it
	}
	path := filepath.Join(dir, "sweep.png")
	if err := p.WritePlot(path); err != nil {
		t.Fatalf("WritePlot: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Errorf("plot is %v, want a readable size", b)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// A size whose timing watch relisted: its unmeasured transitions are in the curve, and the
// one-write-per-transition check covers the transitions the watch saw.
func TestPublishSweepUnmeasured(t *testing.T) {
	gap := sweepRun(1000, 8, 12, 60, 80, 20, 15)
	for i := range gap.Systems {
		if gap.Systems[i].Name == SystemRegistrar {
			gap.Systems[i].Unmeasured, gap.Systems[i].Observed, gap.Systems[i].Writes = 30, 3970, 3970
		}
		if gap.Systems[i].Name == SystemAPIWatch {
			gap.Systems[i].Unmeasured = 12
		}
	}
	p := PublishSweep(KindSweep, "bench-sweep", "make bench-sweep", "abc", []*Results{gap, sweepRun(1000, 9, 12, 61, 80, 21, 15)})
	if got := p.Tables[0].Rows[0][12]; got != "15 (0–30) / 6 (0–12)" {
		t.Errorf("unmeasured = %q", got)
	}
	for _, r := range p.Tables[1].Rows {
		if r[0] == "exactly one store write per transition" {
			if want := "7970 writes / 7970 transitions seen of 8000 (unmeasured 30, lost 0, unexpected 0)"; r[2] != want || r[3] != "met (for the transitions seen)" {
				t.Errorf("one write per transition: %q, %q; want %q, met for the transitions seen", r[2], r[3], want)
			}
		}
	}
	if err := p.WritePlot(filepath.Join(t.TempDir(), "sweep.png")); err != nil {
		t.Fatalf("WritePlot with error bars: %v", err)
	}
}
