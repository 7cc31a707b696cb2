package controlplane

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// Results is what one run measured; the runs of a configuration are written together as a
// Publication (the -out envelope).
type Results struct {
	Date        time.Time `json:"date"`
	Command     string    `json:"command,omitempty"`
	CPUs        int       `json:"cpus"`
	GoVersion   string    `json:"goVersion"`
	Pods        int       `json:"pods"`
	Registries  int       `json:"registries"`
	Namespaces  int       `json:"namespaces"`
	OfferedRate float64   `json:"offeredRatePerSecond"`
	// TransitionsPerRound is how many pods each round flipped (all of them unless capped by
	// -transitions-per-round).
	TransitionsPerRound int `json:"transitionsPerRound"`
	// WriteRate is the rate the harness achieved writing transitions to the API server.
	WriteRate   float64          `json:"writeRatePerSecond"`
	WriteErrors int64            `json:"writeErrors"`
	TTLSample   int              `json:"ttlSample"`
	TTLSeconds  float64          `json:"ttlSeconds"`
	Systems     []SystemResult   `json:"systems"`
	Usage       map[string]Usage `json:"usage"`
	// MeasuredCPUSeconds is each process's CPU time during the measured phase only.
	MeasuredCPUSeconds map[string]float64 `json:"measuredCpuSeconds"`
	// Operator is registrar's own view of the measured phase (its /metrics).
	Operator OperatorStats `json:"operator"`
	// Tails are p99s of the operator's queue, reconcile and store write and of both etcd
	// servers' disk writes over the measured phase.
	Tails *Tails `json:"tails,omitempty"`
	// StoreCommit is the store etcd's own commit over the measured phase (WAL fsync and
	// backend commit) and what it leaves of the deregistration p99 to registrar (issue 39 §4).
	StoreCommit *StoreCommit `json:"storeCommit,omitempty"`
	Ratios      []Ratio      `json:"ratios"`
	Targets     []Target     `json:"targets"`
	Notes       []string     `json:"notes"`
	Profiles    []string     `json:"profiles,omitempty"`
	// Workers: the operator's reconcilers and kube-controller-manager's EndpointSlice syncs.
	Workers map[string]int `json:"workers"`
	// Harness is the harness's own health: if it lagged, the lags include its own.
	Harness HarnessStats `json:"harness"`
	// Machine are the machine's facts and its load average before and after the run.
	Machine benchfmt.Machine `json:"machine"`
	// Warnings say why the run's figures may not measure the systems (empty: none).
	Warnings []string `json:"warnings"`
	// CreateSeconds is how long creating the namespaces, nodes, registries, Services and pods
	// took (at the API server's pace); SetupSeconds until every system showed them all.
	CreateSeconds float64 `json:"createSeconds"`
	SetupSeconds  float64 `json:"setupSeconds"`
}

// CPUPer1kTransitions is the CPU seconds system spent in the measured phase per 1,000
// transitions written (false when it did not run).
func (r *Results) CPUPer1kTransitions(system string) (float64, bool) {
	cpu, ok := r.MeasuredCPUSeconds[system]
	reg, _ := r.System(SystemRegistrar)
	if !ok || reg.Transitions == 0 {
		return 0, false
	}
	return cpu / float64(reg.Transitions) * 1000, true
}

// StoreTxnsPerSecond is the operator's etcd store transactions per second of the measured
// phase.
func (r *Results) StoreTxnsPerSecond() float64 {
	if r.Harness.MeasuredSeconds <= 0 {
		return 0
	}
	return float64(r.Operator.StoreTxns) / r.Harness.MeasuredSeconds
}

// HarnessStats show whether the harness itself was a bottleneck.
type HarnessStats struct {
	// WatcherProcess: the systems were timed from a separate process.
	WatcherProcess bool `json:"watcherProcess"`
	// PaceLag is how late writes were sent against the offered schedule (writers all busy or
	// the harness starved of CPU); WriteRTT how long the API server took to answer them.
	PaceLag  LagStats `json:"paceLag"`
	WriteRTT LagStats `json:"writeRtt"`
	// SchedLag is how late a 10 ms sleep returned in the harness and in the watcher process.
	SchedLag        LagStats `json:"schedLag"`
	WatcherSchedLag LagStats `json:"watcherSchedLag"`
	// MeasuredSeconds is the measured phase's length; MachineBusyCPUSeconds the CPU time the
	// whole machine spent busy in it, TreeCPUSeconds what the run's own processes used (the
	// harness, the watcher, kube-apiserver, the etcds, the operator, kube-controller-manager)
	// and OtherCPUSeconds the rest: other load on a shared machine.
	MeasuredSeconds       float64            `json:"measuredSeconds"`
	MachineBusyCPUSeconds float64            `json:"machineBusyCpuSeconds"`
	TreeCPUSeconds        map[string]float64 `json:"treeCpuSeconds"`
	OtherCPUSeconds       float64            `json:"otherCpuSeconds"`
}

func (r *runner) harnessStats(hlag LagStats, w WatcherStats, measured time.Duration, busy float64, before, after map[string]float64) HarnessStats {
	r.lagMu.Lock()
	defer r.lagMu.Unlock()
	h := HarnessStats{WatcherProcess: r.c.WatcherExe != "", PaceLag: Summarise(r.paceLags), WriteRTT: Summarise(r.writeRTTs),
		SchedLag: hlag, WatcherSchedLag: w.SchedLag, MeasuredSeconds: measured.Seconds(),
		MachineBusyCPUSeconds: busy, TreeCPUSeconds: map[string]float64{}}
	tree := 0.0
	for name, v := range after {
		d := v - before[name]
		h.TreeCPUSeconds[name] = float64(int(d*10+0.5)) / 10
		tree += d
	}
	h.OtherCPUSeconds = max(busy-tree, 0)
	return h
}

// warnings flag a run whose figures measure the harness or the machine rather than the systems.
func warnings(c *Config, res *Results) []string {
	var w []string
	if c.StoreNoFsync {
		w = append(w, "DIAGNOSTIC: the store etcd ran with --unsafe-no-fsync (its writes skip the disk); "+
			"not a comparison a store in production would give")
	}
	if c.KubeEtcdNoFsync {
		w = append(w, "DIAGNOSTIC: the API server's etcd ran with --unsafe-no-fsync (envtest's default): pod and EndpointSlice writes skipped the disk "+
			"that registrar's store writes paid")
	}
	if res.WriteRate < c.MinRateFraction*c.Rate {
		w = append(w, fmt.Sprintf("offered rate not achieved: %.0f/s written of %.0f/s offered (writes sent up to %.0f ms late, p99 %.0f ms; API write "+
			"p99 %.0f ms): the API server or the harness saturated, lags include queueing",
			res.WriteRate, c.Rate, res.Harness.PaceLag.Max, res.Harness.PaceLag.P99, res.Harness.WriteRTT.P99))
	}
	for _, p := range []struct {
		name string
		l    LagStats
	}{{"harness", res.Harness.SchedLag}, {"watcher process", res.Harness.WatcherSchedLag}} {
		if name, l := p.name, p.l; l.P99 > 50 {
			w = append(w, fmt.Sprintf("the %s was starved of CPU: a 10 ms sleep returned %.0f ms late at p99 (max %.0f ms); its timings include that",
				name, l.P99, l.Max))
		}
	}
	for _, s := range res.Systems {
		if s.Unmeasured > 0 {
			w = append(w, fmt.Sprintf("%s: %d of %d transitions unmeasured: they showed while its timing watch had lost its position (relisted %d times), "+
				"so their lags are not in its percentiles", s.Name, s.Unmeasured, s.Transitions, s.WatchRelisted))
		}
	}
	if res.Harness.MeasuredSeconds > 0 {
		if other := res.Harness.OtherCPUSeconds / res.Harness.MeasuredSeconds; other > 0.25*float64(res.Machine.Cores) {
			w = append(w, fmt.Sprintf("other processes used %.1f of %d cores during the measured phase (shared machine)", other, res.Machine.Cores))
		}
	}
	return w
}

// Ratio is how many times slower a peer is than registrar at a percentile.
type Ratio struct {
	Peer   string  `json:"peer"`
	Metric string  `json:"metric"`
	Times  float64 `json:"times"`
}

// Target is one goal of the issue, with what this run measured.
type Target struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Met   bool   `json:"met"`
}

// System returns the named system's result, if it ran.
func (r *Results) System(name string) (SystemResult, bool) {
	for _, s := range r.Systems {
		if s.Name == name {
			return s, true
		}
	}
	return SystemResult{}, false
}

func (r *runner) results(before, after map[string]Usage) *Results {
	res := &Results{
		Date: time.Now().UTC(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		Pods: r.c.Pods, Registries: r.c.Registries, Namespaces: r.c.Namespaces, OfferedRate: r.c.Rate, TransitionsPerRound: len(r.flipped),
		WriteErrors: r.writeErrors.Load(), TTLSample: r.c.TTLSample, TTLSeconds: r.c.TTL.Seconds(),
		Usage: after, MeasuredCPUSeconds: map[string]float64{},
		Workers:       map[string]int{SystemRegistrar: r.c.Reconciles},
		CreateSeconds: r.created.Seconds(), SetupSeconds: r.settledAfter.Seconds(),
	}
	if r.c.EndpointSlice {
		res.Workers[SystemEndpointSlice] = r.c.Reconciles
	}
	if r.writeSpan > 0 {
		res.WriteRate = float64(r.writes) / r.writeSpan.Seconds()
	}
	for _, name := range systemOrder {
		if t := r.trackers[name]; t != nil {
			res.Systems = append(res.Systems, t.Result(name))
		}
	}
	for name, u := range after {
		res.MeasuredCPUSeconds[name] = u.CPUSeconds - before[name].CPUSeconds
	}
	res.Ratios = ratios(res)
	res.Targets = targets(res)
	res.Notes = notes(r.c)
	return res
}

func ratios(res *Results) []Ratio {
	reg, _ := res.System(SystemRegistrar)
	var out []Ratio
	for _, peer := range []string{SystemEndpointSlice, SystemTTLGraceful, SystemTTLCrash, SystemAPIWatch, SystemAPIWatchInProc, SystemAPIWatchShared} {
		p, ok := res.System(peer)
		if !ok {
			continue
		}
		add := func(metric string, peerMs, regMs float64) {
			if peerMs > 0 && regMs > 0 {
				out = append(out, Ratio{Peer: peer, Metric: metric, Times: peerMs / regMs})
			}
		}
		add("deregistration p50", p.Deregistration.P50, reg.Deregistration.P50)
		add("deregistration p99", p.Deregistration.P99, reg.Deregistration.P99)
		add("registration p50", p.Registration.P50, reg.Registration.P50)
		add("registration p99", p.Registration.P99, reg.Registration.P99)
	}
	return out
}

func ratioOf(res *Results, peer, metric string) (float64, bool) {
	for _, r := range res.Ratios {
		if r.Peer == peer && r.Metric == metric {
			return r.Times, true
		}
	}
	return 0, false
}

// targets evaluates the goals for this run's scale (measured, not asserted).
func targets(res *Results) []Target {
	reg, _ := res.System(SystemRegistrar)
	var out []Target
	add := func(name string, met bool, format string, args ...any) {
		out = append(out, Target{Name: name, Met: met, Value: fmt.Sprintf(format, args...)})
	}
	if res.Pods >= 5000 {
		add("p99 lag ≤ 250 ms (5,000 pods)", reg.Deregistration.P99 <= 250 && reg.Registration.P99 <= 250,
			"dereg %.1f ms, reg %.1f ms", reg.Deregistration.P99, reg.Registration.P99)
		add("≥ 500 transitions/s sustained", reg.Sustained >= 500, "%.0f/s", reg.Sustained)
	} else {
		add("deregistration p99 ≤ 100 ms", reg.Deregistration.P99 <= 100, "%.1f ms", reg.Deregistration.P99)
		add("registration p99 ≤ 200 ms", reg.Registration.P99 <= 200, "%.1f ms", reg.Registration.P99)
	}
	if reg.Unmeasured > 0 {
		// The writes of a watch gap are not seen: check the transitions the watch saw.
		add("exactly one store write per transition seen", reg.Writes == reg.Transitions-reg.Unmeasured && reg.Lost == 0 && reg.Unexpected == 0,
			"%d writes / %d transitions seen of %d (unmeasured %d, lost %d, unexpected %d)",
			reg.Writes, reg.Transitions-reg.Unmeasured, reg.Transitions, reg.Unmeasured, reg.Lost, reg.Unexpected)
	} else {
		add("exactly one store write per transition", reg.Writes == reg.Transitions && reg.Lost == 0 && reg.Unexpected == 0,
			"%d writes / %d transitions (lost %d, unexpected %d)", reg.Writes, reg.Transitions, reg.Lost, reg.Unexpected)
	}
	rss := res.Usage[SystemRegistrar].PeakRSSMiB
	add("operator peak RSS ≤ 150 MiB", rss <= 150, "%.1f MiB", rss)
	if d, ok := ratioOf(res, SystemEndpointSlice, "deregistration p99"); ok {
		r, _ := ratioOf(res, SystemEndpointSlice, "registration p99")
		add("faster than EndpointSlice at p99", d > 1 && r > 1, "dereg %.1f×, reg %.1f×", d, r)
	}
	if d, ok := ratioOf(res, SystemTTLCrash, "deregistration p99"); ok {
		add("≥ 100× faster than a crashed TTL client (dereg p99)", d >= 100, "%.0f×", d)
	}
	if d, ok := ratioOf(res, SystemTTLGraceful, "deregistration p99"); ok {
		add("faster than a graceful TTL client (dereg p99)", d > 1, "%.2f×", d)
	}
	return out
}

func notes(c *Config) []string {
	n := []string{
		"lag = API write sent (pod status patch or delete) -> change seen by the watcher process (separate from the writers; each system on its own " +
			"connection: etcd watches for registrar and TTL, API watches for EndpointSlices and pods)",
		fmt.Sprintf("rounds: every flipped pod (%d of %d) %s, each round in random order at the offered rate; delete is grace period 0",
			c.flipped(), c.Pods, strings.Join(causes(), " -> ")),
		"apiwatch: the floor every controller pays, the pod write seen by a plain API watch in the watcher process; diagnostics of the harness, not " +
			"peers: apiwatch-inproc, the same watch inside the harness process on its own connection, and apiwatch-shared, the old harness's floor (inside " +
			"the harness on the writers' connection)",
		"EndpointSlice: a pod counts as registered while a slice lists it with conditions.ready=true",
		fmt.Sprintf("workers: registrar --max-concurrent-reconciles=%d; kube-controller-manager --concurrent-service-endpoint-syncs=%d", c.Reconciles, c.Reconciles),
	}
	if c.EndpointSlice {
		flags := append([]string{"--controllers=endpointslice-controller",
			fmt.Sprintf("--concurrent-service-endpoint-syncs=%d", c.Reconciles)}, c.KCMArgs...)
		n = append(n, "kube-controller-manager flags: "+strings.Join(flags, " "))
	}
	if c.TTLSample > 0 {
		n = append(n, fmt.Sprintf("TTL registries measured on two disjoint samples of %d of %d pods; TTL %s, keepalive every %s; registration is the "+
			"instance's own grant+put; ttl-graceful: the instance revokes its lease on unready and on shutdown (delete); ttl-crash: every deregistration is "+
			"a crash, the key lives until the lease expires",
			c.TTLSample, c.Pods, c.TTL, c.TTL/3))
	}
	return n
}

func causes() []string {
	out := make([]string, len(Rounds))
	for i, c := range Rounds {
		out[i] = string(c)
	}
	return out
}

// WriteJSON writes res to path.
func (r *Results) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteTable prints the results as a table.
func (r *Results) WriteTable(out io.Writer) {
	fmt.Fprintf(out, "registrar benchmark %s: %d pods (%d flipped per round), %d ServiceRegistries, %d namespaces, %d CPUs, offered %.0f transitions/s "+
		"(API writes achieved %.0f/s, %d failed); load average %.2f/%.2f/%.2f before, %.2f/%.2f/%.2f after\n",
		r.Date.Format(time.RFC3339), r.Pods, r.TransitionsPerRound, r.Registries, r.Namespaces, r.CPUs, r.OfferedRate, r.WriteRate, r.WriteErrors,
		r.Machine.LoadBefore[0], r.Machine.LoadBefore[1], r.Machine.LoadBefore[2], r.Machine.LoadAfter[0], r.Machine.LoadAfter[1], r.Machine.LoadAfter[2])
	fmt.Fprintf(out, "workers: registrar %d reconcilers, kube-controller-manager %d EndpointSlice syncs\n",
		r.Workers[SystemRegistrar], r.Workers[SystemEndpointSlice])
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "\t"
	for _, s := range r.Systems {
		header += s.Name + "\t"
	}
	fmt.Fprintln(w, header)
	row := func(label string, f func(s SystemResult) string) {
		line := label + "\t"
		for _, s := range r.Systems {
			line += f(s) + "\t"
		}
		fmt.Fprintln(w, line)
	}
	for _, k := range []struct {
		name string
		get  func(SystemResult) LagStats
	}{{"deregistration", func(s SystemResult) LagStats { return s.Deregistration }},
		{"registration", func(s SystemResult) LagStats { return s.Registration }}} {
		row(k.name+" lag p50 (ms)", func(s SystemResult) string { return fmt.Sprintf("%.1f", k.get(s).P50) })
		row(k.name+" lag p90 (ms)", func(s SystemResult) string { return fmt.Sprintf("%.1f", k.get(s).P90) })
		row(k.name+" lag p99 (ms)", func(s SystemResult) string { return fmt.Sprintf("%.1f", k.get(s).P99) })
		row(k.name+" lag max (ms)", func(s SystemResult) string { return fmt.Sprintf("%.1f", k.get(s).Max) })
	}
	row("transitions observed/written", func(s SystemResult) string { return fmt.Sprintf("%d/%d", s.Observed, s.Transitions) })
	row("lost / unexpected writes", func(s SystemResult) string { return fmt.Sprintf("%d / %d", s.Lost, s.Unexpected) })
	row("unmeasured (in a watch gap)", func(s SystemResult) string { return fmt.Sprint(s.Unmeasured) })
	row("timing watch resumed / relisted", func(s SystemResult) string { return fmt.Sprintf("%d / %d", s.WatchResumed, s.WatchRelisted) })
	row("transitions/s sustained", func(s SystemResult) string { return fmt.Sprintf("%.0f", s.Sustained) })
	row("store writes per transition", func(s SystemResult) string {
		if s.Writes == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", s.WritesPerTransition)
	})
	row("peak RSS (MiB)", func(s SystemResult) string { return r.usageCell(s.Name, func(u Usage) float64 { return u.PeakRSSMiB }) })
	row("CPU seconds (measured phase)", func(s SystemResult) string {
		if v, ok := r.MeasuredCPUSeconds[s.Name]; ok {
			return fmt.Sprintf("%.1f", v)
		}
		return "-"
	})
	row("CPU seconds (whole run)", func(s SystemResult) string { return r.usageCell(s.Name, func(u Usage) float64 { return u.CPUSeconds }) })
	_ = w.Flush()
	if reg, ok := r.System(SystemRegistrar); ok && reg.Transitions > 0 {
		o := r.Operator
		fmt.Fprintf(out, "registrar inside: %d reconciles, mean queue wait %.1f ms, mean reconcile %.1f ms; %d API writes (%.2f per transition: %d PATCH, %d POST)\n",
			o.Reconciles, o.QueueWaitMs, o.ReconcileMs, o.APIWrites, float64(o.APIWrites)/float64(reg.Transitions), o.StatusPatches, o.Posts)
		if len(o.ReconcilesByTrigger) > 0 {
			fmt.Fprintf(out, "registrar reconciles per transition: %.2f; by trigger: %v\n",
				float64(o.Reconciles)/float64(reg.Transitions), o.ReconcilesByTrigger)
		}
		fmt.Fprintf(out, "registrar store: %d etcd transactions (%.1f/s, %.2f registry changes each) for %d transitions\n",
			o.StoreTxns, r.StoreTxnsPerSecond(), float64(o.StoreTxnItems)/float64(max(o.StoreTxns, 1)), reg.Transitions)
	}
	if sc := r.StoreCommit; sc != nil {
		fmt.Fprintf(out, "store etcd commit (measured phase): %d WAL fsyncs, p99 %s ms; %d backend commits, p99 %s ms; store commit p99 (sum) %s ms; "+
			"registrar's part of the deregistration p99 (− floor − store commit) %s ms (target ≤ %.0f)\n",
			sc.WALFsyncs, msCell(sc.WALFsyncP99Ms, "%.1f"), sc.BackendCommits, msCell(sc.BackendCommitP99Ms, "%.1f"), msCell(sc.P99Ms, "%.1f"),
			msCell(sc.RegistrarPartMs, "%+.1f"), TargetRegistrarPartMs)
	}
	for _, sys := range []string{SystemRegistrar, SystemEndpointSlice} {
		if v, ok := r.CPUPer1kTransitions(sys); ok {
			fmt.Fprintf(out, "CPU seconds per 1,000 transitions, %s: %.2f\n", sys, v)
		}
	}
	fmt.Fprintf(out, "setup: objects created in %.0f s, every system showed them after %.0f s\n", r.CreateSeconds, r.SetupSeconds)
	for _, rt := range r.Ratios {
		fmt.Fprintf(out, "ratio %s/registrar %s: %s\n", rt.Peer, rt.Metric, times(rt.Times))
	}
	for _, t := range r.Targets {
		fmt.Fprintf(out, "target %-45s %-4s %s\n", t.Name, map[bool]string{true: "MET", false: "MISS"}[t.Met], t.Value)
	}
	h := r.Harness
	fmt.Fprintf(out, "harness: watchers in a separate process %v; writes sent late p99 %.1f ms (max %.1f); API write p99 %.1f ms; 10 ms sleep late p99 "+
		"%.1f ms in the harness, %.1f ms in the watcher process\n",
		h.WatcherProcess, h.PaceLag.P99, h.PaceLag.Max, h.WriteRTT.P99, h.SchedLag.P99, h.WatcherSchedLag.P99)
	fmt.Fprintf(out, "machine CPU in the measured phase (%.0f s): %.1f s busy, of which this run's processes %s, other processes %.1f s\n",
		h.MeasuredSeconds, h.MachineBusyCPUSeconds, cpuList(h.TreeCPUSeconds), h.OtherCPUSeconds)
	for _, n := range r.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(out, "WARNING: %s\n", w)
	}
}

// msCell formats an optional figure, "-" when absent.
func msCell(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func cpuList(m map[string]float64) string {
	names := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f s", n, m[n]))
	}
	return strings.Join(parts, ", ")
}

func (r *Results) usageCell(name string, f func(Usage) float64) string {
	u, ok := r.Usage[name]
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.1f", f(u))
}
