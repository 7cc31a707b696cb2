// Command cmd (go run ./bench/controlplane/cmd) runs registrar's control-plane benchmark
// (package controlplane, `make bench`): it prints a table per run and a summary over the runs
// (median, range, what is within noise), and writes the envelope of docs/bench (-out).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/registrar-dev/registrar/bench/controlplane"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == controlplane.WatcherArg {
		if err := controlplane.WatcherMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench watcher:", err)
			os.Exit(1)
		}
		return
	}
	var c controlplane.Config
	var out string
	var o options
	flag.IntVar(&c.Pods, "pods", 1000, "Pods.")
	flag.IntVar(&c.Registries, "registries", 100, "ServiceRegistries (and Services).")
	flag.IntVar(&c.Namespaces, "namespaces", 10, "Namespaces the registries are spread over.")
	flag.Float64Var(&c.Rate, "rate", 500, "Offered transitions per second.")
	flag.IntVar(&c.TransitionsPerRound, "transitions-per-round", 0, "Pods each round flips (ready, unready, ready, delete: the same pods, chosen by -seed); "+
		"0: every pod. A cap keeps a 20,000-pod run bounded and CPU per 1,000 transitions comparable between sizes.")
	flag.IntVar(&c.Writers, "writers", 256, "API writes in flight at most (more than the rate times the API write latency, or the writers limit the rate).")
	flag.StringVar(&c.Operator, "operator", "bin/bench/registrar", "registrar binary (go build -o ... ./cmd).")
	flag.BoolVar(&c.EndpointSlice, "endpointslice", true, "Run kube-controller-manager's EndpointSlice controller side by side.")
	flag.StringVar(&c.ControllerManager, "kube-controller-manager", filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager"), "kube-controller-manager binary.")
	kcmArgs := flag.String("kcm-args", strings.Join(controlplane.KCMDefaultArgs, " "), "Extra kube-controller-manager flags (space-separated).")
	opArgs := flag.String("operator-args", "", "Extra registrar flags (space-separated).")
	flag.IntVar(&c.TTLSample, "ttl-sample", 100, "Pods that also run a self-registration TTL instance, per kind (graceful and crashing: twice this many pods; 0: no TTL peer).")
	flag.IntVar(&c.Reconciles, "reconciles", 8, "Workers of both controllers: registrar's --max-concurrent-reconciles and kube-controller-manager's --concurrent-service-endpoint-syncs.")
	flag.BoolVar(&o.inProcess, "in-process-watchers", false, "Time the systems from the harness process (each watch on its own connection) instead of a separate watcher process.")
	flag.Float64Var(&c.MinRateFraction, "min-rate", 0.9, "Flag a run whose achieved write rate is below this fraction of -rate.")
	flag.BoolVar(&c.RequireRate, "require-rate", false, "Fail when the achieved write rate is below -min-rate of -rate.")
	flag.IntVar(&o.runs, "runs", 1, "Runs of the configuration, each on a fresh control plane; the summary gives median and range.")
	flag.StringVar(&o.kind, "kind", "bench", "Kind of the published envelope (bench, bench-large).")
	flag.StringVar(&o.tableID, "table-id", "bench", "Id of the rendered tables (<id> and <id>-ratios) in the envelope.")
	flag.StringVar(&o.republish, "republish", "", "Rebuild the tables of this envelope from its raw runs (after a change of the tables' code) and exit; runs nothing.")
	flag.StringVar(&o.command, "command", "", "The command to record (default: the arguments of this process).")
	flag.DurationVar(&c.TTL, "ttl", 15*time.Second, "TTL of the TTL registry's leases (keepalive every TTL/3).")
	flag.DurationVar(&c.RoundTimeout, "round-timeout", 2*time.Minute, "Longest wait for a round's transitions to show.")
	flag.StringVar(&c.WorkDir, "workdir", "bin/bench/run", "Logs, kubeconfigs and data of the run (emptied first).")
	flag.BoolVar(&c.StoreNoFsync, "store-unsafe-no-fsync", false, "DIAGNOSTIC: run the store etcd with --unsafe-no-fsync, to see how much of registrar's lag is the store's disk write (flagged in every run's warnings; never a published comparison).")
	flag.BoolVar(&c.KubeEtcdNoFsync, "kube-etcd-unsafe-no-fsync", false, "DIAGNOSTIC: run the API server's etcd with --unsafe-no-fsync, as envtest does by default (flagged in every run's warnings). Off: both etcd servers fsync, as in production.")
	flag.StringVar(&c.ProfileDir, "profile-dir", "", "Write the operator's CPU and heap profiles here.")
	flag.IntVar(&c.ProfileSeconds, "profile-seconds", 30, "Length of the CPU profile, from the start of the measured phase.")
	flag.Int64Var(&c.Seed, "seed", 1, "Seed of the transition order.")
	flag.StringVar(&out, "out", "bin/bench/bench-results.json", "Where the JSON results go.")
	flag.StringVar(&o.sweep, "sweep", "", "Comma-separated pod counts (e.g. 1000,5000,20000): run -runs runs at each size (registries = pods / 10) and publish the growth curve, "+
		"the targets of issue 16, and a PNG plot next to -out (.png for .json).")
	flag.DurationVar(&c.FaultWatchCut, "fault-watch-cut", 0, "Fault: close every timing watch this often during the measured phase (they must resume and miss nothing; 0: never).")
	flag.DurationVar(&c.FaultWatchRelist, "fault-watch-relist", 0, "Fault: make every timing watch lose its position this often, as on 410 Gone, for half the period (at most 1s), "+
		"then relist; transitions in the gap count as unmeasured (0: never).")
	flag.BoolVar(&o.restart, "restart", false, "The restart benchmark (issue 39 §3) instead of the rounds: on each of -runs control planes, every pod created ready and registered, "+
		"registrar restarted, kube-controller-manager restarted and registrar failing over (two replicas, the leader killed), each with nothing changed and while "+
		"-restart-dying pods die: writes caused, API requests, time until synced, peak RSS, dereg lag of the dying pods.")
	flag.IntVar(&o.rc.Trials, "restart-trials", 1, "With -restart: trials of each scenario per control plane (each a kill with nothing changed and one while pods die).")
	flag.IntVar(&o.rc.Dying, "restart-dying", 100, "With -restart: pods that die (half deleted, half turned unready) during each kill of the second kind.")
	flag.DurationVar(&o.rc.DyingOver, "restart-dying-over", 10*time.Second, "With -restart: the deaths are spread over this long from just after the kill.")
	flag.StringVar(&o.restartScenarios, "restart-scenarios", strings.Join(controlplane.RestartScenarios, ","), "With -restart: the scenarios, in order.")
	flag.StringVar(&o.restartSignal, "restart-signal", "KILL", "With -restart: how a controller is killed: KILL (a crash) or TERM (registrar releases its lease on the way out).")
	flag.StringVar(&o.failoverArgs, "failover-args", "", "With -restart: leader election flags of the fail-over pair beyond --leader-elect (space-separated; default: the binary's, a 15 s lease).")
	flag.DurationVar(&c.SetupTimeout, "setup-timeout", 0, "Longest wait for the systems to show the created objects (default 5m, and 1m per 1,000 pods above 5,000).")
	flag.Parse()
	c.KCMArgs = strings.Fields(*kcmArgs)
	c.OperatorArgs = strings.Fields(*opArgs)
	c.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	o.out = out
	if err := run(c, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	out, kind, tableID, command, republish, sweep string
	runs                                          int
	inProcess                                     bool
	// The restart benchmark (-restart).
	restart                                       bool
	rc                                            controlplane.RestartConfig
	restartScenarios, restartSignal, failoverArgs string
}

func run(c controlplane.Config, o options) error {
	if o.republish != "" {
		return republish(o.republish)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !o.inProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this executable for the watcher process: %w", err)
		}
		c.WatcherExe = exe
	}
	if o.command == "" {
		o.command = strings.Join(os.Args, " ")
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	start := time.Now()
	commit := gitCommit() // the code that runs: read before the runs, which take minutes
	if o.sweep != "" {
		return runSweep(ctx, c, o, commit, start)
	}
	if o.restart {
		return runRestart(ctx, c, o, commit, start)
	}
	runs, failed, err := runSize(ctx, c, o, c.WorkDir)
	if err != nil {
		return err
	}
	pub := controlplane.Publish(o.kind, o.tableID, o.command, commit, runs)
	pub.WriteSummary(os.Stdout)
	fmt.Printf("%d run(s) took %s; results in %s\n", len(runs), time.Since(start).Round(time.Second), o.out)
	if err := pub.WriteJSON(o.out); err != nil {
		return err
	}
	return failed
}

// runSize runs the configuration o.runs times, each on a fresh control plane under workDir.
func runSize(ctx context.Context, c controlplane.Config, o options, workDir string) ([]*controlplane.Results, error, error) {
	var runs []*controlplane.Results
	var failed error
	for i := range max(o.runs, 1) {
		c := c
		c.WorkDir = workDir
		if o.runs > 1 {
			c.WorkDir = filepath.Join(workDir, fmt.Sprintf("run-%d", i+1))
			c.Logf("run %d of %d", i+1, o.runs)
		}
		if err := os.RemoveAll(c.WorkDir); err != nil {
			return nil, nil, err
		}
		res, err := controlplane.Run(ctx, c)
		if err != nil {
			return nil, nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		res.Command = o.command
		res.WriteTable(os.Stdout)
		if c.RequireRate && len(res.Warnings) > 0 && res.WriteRate < c.MinRateFraction*c.Rate {
			failed = fmt.Errorf("run %d: offered rate not achieved (%.0f/s of %.0f/s)", i+1, res.WriteRate, c.Rate)
		}
		runs = append(runs, res)
	}
	return runs, failed, nil
}

// runSweep runs every size of o.sweep and publishes the growth curve, the targets and the plot.
func runSweep(ctx context.Context, c controlplane.Config, o options, commit string, start time.Time) error {
	var sizes []int
	for _, f := range strings.Split(o.sweep, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-sweep: %q is not a pod count", f)
		}
		sizes = append(sizes, n)
	}
	if o.kind == "bench" { // the defaults of a single configuration
		o.kind, o.tableID = controlplane.KindSweep, controlplane.KindSweep
	}
	var runs []*controlplane.Results
	var failed error
	for _, n := range sizes {
		c := c
		c.Pods, c.Registries = n, max(n/10, 1)
		if c.SetupTimeout <= 0 {
			c.SetupTimeout = 5*time.Minute + time.Duration(max(n-5000, 0)/1000)*time.Minute
		}
		c.Logf("sweep: %d pods, %d registries", c.Pods, c.Registries)
		sizeStart := time.Now()
		r, f, err := runSize(ctx, c, o, filepath.Join(c.WorkDir, fmt.Sprintf("pods-%d", n)))
		if err != nil {
			return fmt.Errorf("%d pods: %w", n, err)
		}
		c.Logf("sweep: %d pods took %s", n, time.Since(sizeStart).Round(time.Second))
		runs, failed = append(runs, r...), errors.Join(failed, f)
		// Publish what is measured so far: a long sweep cut short keeps its smaller sizes.
		if err := publishSweep(o, commit, runs, false); err != nil {
			return err
		}
	}
	if err := publishSweep(o, commit, runs, true); err != nil {
		return err
	}
	fmt.Printf("sweep of %d size(s), %d run(s) took %s; results in %s and %s\n",
		len(sizes), len(runs), time.Since(start).Round(time.Second), o.out, plotPath(o.out))
	return failed
}

func publishSweep(o options, commit string, runs []*controlplane.Results, final bool) error {
	pub := controlplane.PublishSweep(o.kind, o.tableID, o.command, commit, runs)
	if final {
		pub.WriteSummary(os.Stdout)
	}
	if err := pub.WriteJSON(o.out); err != nil {
		return err
	}
	return pub.WritePlot(plotPath(o.out))
}

// plotPath is the PNG next to the JSON envelope.
func plotPath(out string) string { return strings.TrimSuffix(out, filepath.Ext(out)) + ".png" }

// gitCommit is the commit of the working tree, with "-dirty" when it has uncommitted changes.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		commit += "-dirty"
	}
	return commit
}

// republish rebuilds the tables of a committed envelope from its raw runs, keeping its date,
// commit and command.
func republish(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var kind struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &kind); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if kind.Kind == controlplane.KindRestart {
		return republishRestart(path, data)
	}
	var old controlplane.Publication
	if err := json.Unmarshal(data, &old); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(old.Tables) == 0 || len(old.Runs) == 0 {
		return fmt.Errorf("%s: no tables or no runs to rebuild from", path)
	}
	publish := controlplane.Publish
	if old.Kind == controlplane.KindSweep {
		publish = controlplane.PublishSweep
	}
	pub := publish(old.Kind, old.Tables[0].ID, old.Command, old.Commit, old.Runs)
	pub.Date, pub.Machine = old.Date, old.Machine
	pub.WriteSummary(os.Stdout)
	if err := pub.WriteJSON(path); err != nil {
		return err
	}
	if old.Kind == controlplane.KindSweep {
		return pub.WritePlot(plotPath(path))
	}
	return nil
}

// runRestart runs the restart benchmark on o.runs fresh control planes and publishes them.
func runRestart(ctx context.Context, c controlplane.Config, o options, commit string, start time.Time) error {
	if o.kind == "bench" { // the defaults of a single configuration
		o.kind, o.tableID = controlplane.KindRestart, controlplane.KindRestart
	}
	o.rc.Scenarios = strings.Split(o.restartScenarios, ",")
	switch strings.TrimPrefix(strings.ToUpper(o.restartSignal), "SIG") {
	case "KILL":
		o.rc.Signal = syscall.SIGKILL
	case "TERM":
		o.rc.Signal = syscall.SIGTERM
	default:
		return fmt.Errorf("-restart-signal %q: want KILL or TERM", o.restartSignal)
	}
	o.rc.FailoverArgs = strings.Fields(o.failoverArgs)
	if c.SetupTimeout <= 0 {
		c.SetupTimeout = 5*time.Minute + time.Duration(max(c.Pods-5000, 0)/1000)*time.Minute
	}
	var runs []*controlplane.RestartRun
	for i := range max(o.runs, 1) {
		c := c
		if o.runs > 1 {
			c.WorkDir = filepath.Join(c.WorkDir, fmt.Sprintf("run-%d", i+1))
			c.Logf("run %d of %d", i+1, o.runs)
		}
		if err := os.RemoveAll(c.WorkDir); err != nil {
			return err
		}
		run, err := controlplane.RunRestart(ctx, c, o.rc)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		run.Command = o.command
		runs = append(runs, run)
		// Publish what is measured so far: a long series cut short keeps its first runs.
		if err := controlplane.PublishRestart(o.kind, o.tableID, o.command, commit, runs).WriteJSON(o.out); err != nil {
			return err
		}
	}
	pub := controlplane.PublishRestart(o.kind, o.tableID, o.command, commit, runs)
	pub.WriteSummary(os.Stdout)
	fmt.Printf("%d run(s) took %s; results in %s\n", len(runs), time.Since(start).Round(time.Second), o.out)
	return pub.WriteJSON(o.out)
}

// republishRestart rebuilds the tables of a restart envelope from its runs.
func republishRestart(path string, data []byte) error {
	var old controlplane.RestartPublication
	if err := json.Unmarshal(data, &old); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(old.Tables) == 0 || len(old.Runs) == 0 {
		return fmt.Errorf("%s: no tables or no runs to rebuild from", path)
	}
	pub := controlplane.PublishRestart(old.Kind, old.Tables[0].ID, old.Command, old.Commit, old.Runs)
	pub.Date, pub.Machine = old.Date, old.Machine
	pub.WriteSummary(os.Stdout)
	return pub.WriteJSON(path)
}
