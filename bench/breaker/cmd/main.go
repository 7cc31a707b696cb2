// Command cmd (go run ./bench/breaker/cmd) runs the seed's breaker scenario (package breaker)
// against a real etcd it starts, in both modes, several times, and prints the medians and
// spreads; it writes every run and the machine's facts as JSON. make bench-breaker runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/registrar-dev/registrar/bench/breaker"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// modes: per-instance breakers with the default ±20 % jitter on the open duration,
// per-instance without jitter (the seed's synchronised fleet), and coordinated.
var modes = []string{"per-instance", "per-instance-no-jitter", "coordinated"}

type report struct {
	Date      time.Time              `json:"date"`
	Commit    string                 `json:"commit"`
	Command   string                 `json:"command"`
	Machine   machine                `json:"machine"`
	Config    map[string]any         `json:"config"`
	Runs      []breaker.Result       `json:"runs"`
	Summary   map[string]summary     `json:"summary"`
	HotPathNs map[string][]float64   `json:"hotPathNsPerCall"`
	HotPath   map[string]spreadFloat `json:"hotPathSummary"`
}

type machine struct {
	NProc      int    `json:"nproc"`
	GoVersion  string `json:"goVersion"`
	LoadBefore string `json:"loadAverageBefore"`
	LoadAfter  string `json:"loadAverageAfter"`
}

type spreadFloat struct{ Median, Min, Max float64 }

type summary struct {
	ProbesFirstSecond   spreadFloat `json:"probesFirstSecond"`
	RequestsFirstSecond spreadFloat `json:"requestsFirstSecond"`
	Relapses            spreadFloat `json:"relapses"`
	RelapsedRuns        int         `json:"relapsedRuns"`
	FleetClosedAfterS   spreadFloat `json:"fleetClosedAfterSeconds"`
	NeverClosedRuns     int         `json:"neverClosedRuns"`
	WritesPerCall       spreadFloat `json:"storeWritesPerCall"`
	Fallbacks           spreadFloat `json:"fallbacks"`
}

func spread(v []float64) spreadFloat {
	if len(v) == 0 {
		return spreadFloat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spreadFloat{Median: m, Min: s[0], Max: s[len(s)-1]}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return strings.TrimSpace(string(b))
	}
	return strings.Join(f[:3], " ")
}

func main() {
	def := breaker.Defaults()
	runs := flag.Int("runs", 3, "runs per mode")
	failFor := flag.Duration("fail-for", def.FailFor, "how long the dependency fails")
	callers := flag.Int("callers", def.Callers, "callers (each with its own discovery client)")
	out := flag.String("out", "", "JSON report path (default docs/bench/breaker-DATE.json)")
	only := flag.String("modes", strings.Join(modes, ","), "modes to run, comma-separated")
	flag.Parse()
	modes = strings.Split(*only, ",")
	if err := run(*runs, *failFor, *callers, *out); err != nil {
		fmt.Fprintln(os.Stderr, "breaker:", err)
		os.Exit(1)
	}
}

func run(runs int, failFor time.Duration, callers int, out string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "breakerbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := etcdtest.Start(dir)
	if err != nil {
		return err
	}
	defer srv.Stop()

	rep := report{Date: time.Now().UTC(), Summary: map[string]summary{},
		Command:   "make bench-breaker: go run ./bench/breaker/cmd " + strings.Join(os.Args[1:], " "),
		HotPathNs: map[string][]float64{}, HotPath: map[string]spreadFloat{}}
	if b, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		rep.Commit = strings.TrimSpace(string(b))
	}
	rep.Machine = machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadavg()}
	base := breaker.Defaults()
	base.FailFor, base.Callers, base.Endpoint = failFor, callers, srv.Endpoint()
	rep.Config = map[string]any{
		"callers": base.Callers, "callEvery": base.CallEvery.String(), "failFor": base.FailFor.String(), "capacityWhileCold": base.Capacity,
		"cold": base.Cold.String(), "relapseFor": base.RelapseFor.String(), "coldLatency": base.ColdLatency.String(), "warmLatency": base.WarmLatency.String(),
		"quorum": base.Quorum, "storeTimeout": base.StoreTimeout.String(), "openDuration": base.Breaker.OpenDuration.String(),
		"openJitter": base.Breaker.OpenJitter, "window": base.Breaker.Window.String(), "minCalls": base.Breaker.MinCalls,
		"halfOpenPermits": base.Breaker.HalfOpenPermits, "slowStart": base.Breaker.SlowStart.String(), "settle": base.Settle.String(),
	}
	byMode := map[string][]breaker.Result{}
	for i := range runs {
		for _, mode := range modes {
			cfg := base
			cfg.Name = mode
			cfg.Coordinated = mode == "coordinated"
			if mode == "per-instance-no-jitter" {
				cfg.Breaker.OpenJitter = 1e-9 // 0 means the default
			}
			cfg.Prefix = fmt.Sprintf("/bench/run%d-%s", i, mode)
			fmt.Fprintf(os.Stderr, "run %d/%d %s ...\n", i+1, runs, mode)
			res, err := breaker.Run(ctx, cfg)
			if err != nil {
				return fmt.Errorf("run %d (%s): %w", i, mode, err)
			}
			fmt.Fprintf(os.Stderr, "  %+v\n", res)
			rep.Runs = append(rep.Runs, res)
			byMode[res.Mode] = append(byMode[res.Mode], res)
		}
		hp, err := breaker.HotPath(ctx, srv.Endpoint(), fmt.Sprintf("/bench/hot%d", i))
		if err != nil {
			return err
		}
		for k, v := range hp {
			rep.HotPathNs[k] = append(rep.HotPathNs[k], v)
		}
	}
	for k, v := range rep.HotPathNs {
		rep.HotPath[k] = spread(v)
	}
	for mode, rs := range byMode {
		var probes, reqs, rel, closed, wpc, fb []float64
		s := summary{}
		for _, r := range rs {
			probes = append(probes, float64(r.ProbesFirstSecond))
			reqs = append(reqs, float64(r.RequestsFirstSecond))
			rel = append(rel, float64(r.Relapses))
			if r.Relapses > 0 {
				s.RelapsedRuns++
			}
			if r.FleetClosedAfter < 0 {
				s.NeverClosedRuns++
			} else {
				closed = append(closed, r.FleetClosedAfter.Seconds())
			}
			wpc = append(wpc, r.WritesPerCall)
			fb = append(fb, float64(r.Fallbacks))
		}
		s.ProbesFirstSecond, s.RequestsFirstSecond, s.Relapses = spread(probes), spread(reqs), spread(rel)
		s.FleetClosedAfterS, s.WritesPerCall, s.Fallbacks = spread(closed), spread(wpc), spread(fb)
		rep.Summary[mode] = s
	}
	rep.Machine.LoadAfter = loadavg()

	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "breaker bench %s, commit %s, %d callers, dependency fails %s, %d runs per mode (median [min–max])\n",
		rep.Date.Format(time.RFC3339), rep.Commit, base.Callers, base.FailFor, runs)
	fmt.Fprintln(tw, "mode\tprobes in 1st s\trequests in 1st s\trelapsed runs\tfleet Closed after (s)\tstore writes/call\tfallbacks")
	for _, mode := range modes {
		s := rep.Summary[mode]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", mode, f0(s.ProbesFirstSecond), f0(s.RequestsFirstSecond), s.RelapsedRuns, runs,
			f2(s.FleetClosedAfterS)+never(s.NeverClosedRuns), f5(s.WritesPerCall), f0(s.Fallbacks))
	}
	none := rep.HotPath["none"].Median
	fmt.Fprintf(tw, "hot path, ns per Do (median [min–max]): none %s; per-instance %s (+%.0f); coordinated %s (+%.0f)\n",
		f0(rep.HotPath["none"]), f0(rep.HotPath["per-instance"]), rep.HotPath["per-instance"].Median-none,
		f0(rep.HotPath["coordinated"]), rep.HotPath["coordinated"].Median-none)
	fmt.Fprintf(tw, "machine: nproc %d, load average before %s, after %s\n", rep.Machine.NProc, rep.Machine.LoadBefore, rep.Machine.LoadAfter)
	_ = tw.Flush()

	if out == "" {
		out = filepath.Join("docs", "bench", "breaker-"+rep.Date.Format("2006-01-02T1504Z")+".json")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Println("wrote", out)
	return nil
}

func f0(s spreadFloat) string { return fmt.Sprintf("%.0f [%.0f–%.0f]", s.Median, s.Min, s.Max) }
func f2(s spreadFloat) string { return fmt.Sprintf("%.2f [%.2f–%.2f]", s.Median, s.Min, s.Max) }
func f5(s spreadFloat) string { return fmt.Sprintf("%.5f [%.5f–%.5f]", s.Median, s.Min, s.Max) }

func never(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (never in %d)", n)
}
