// Command rollout is the rolling-update benchmark of issue 39 §2 (make bench-rollout): one
// service of -pods pods (a Deployment with maxSurge 25 %, maxUnavailable 0) rolls from
// revision 1 to revision 2 on a real control plane (bench/controlplane: envtest's
// kube-apiserver and etcd, a real store etcd, the operator as a process built from ./cmd with
// its xDS server on), while -xds-clients simulated proxyless gRPC clients (real ADS streams,
// some state of the world and some delta, ACKing every response) and -watchers pkg/discovery
// Clients follow the service. The harness plays the kubelet and the Deployment controller:
// it creates each step's new pods, marks them ready, then starts as many old pods'
// deletion, and deletes them for good after a grace.
//
// Per run: bytes the xDS clients received per pod transition (state of the world and delta
// apart), bytes the watchers received from the store, the operator's CPU per transition and
// peak RSS (from /proc), and the tail of pod ready (and pod terminating) → every xDS client
// has it and → every watcher has it, beside the API watch floor. The runs go into one
// bench/benchfmt envelope (-out) whose table bench/benchdoc renders into docs/xds.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // -pprof
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

func main() {
	if spec := os.Getenv(watchersEnv); spec != "" {
		if err := serveWatchers(spec); err != nil {
			fmt.Fprintln(os.Stderr, "rollout watchers:", err)
			os.Exit(1)
		}
		return
	}
	var (
		c         Config
		runs      = flag.Int("runs", 1, "Runs.")
		out       = flag.String("out", "", "Where to write the envelope (JSON).")
		command   = flag.String("command", "make bench-rollout", "The command recorded in the envelope.")
		work      = flag.String("workdir", "bin/bench/rollout", "Logs, data and profiles of the runs.")
		profile   = flag.Bool("profile", false, "Fetch the operator's CPU profile of each run's rollout (-profile-seconds long) into the run's directory.")
		pprofAt   = flag.String("pprof", "", "Serve this process's net/http/pprof on this address (e.g. 127.0.0.1:6061).")
		republish = flag.String("republish", "", "Rebuild the table of this envelope from its runs (after a change of the table's code), keeping its date, commit and command; runs nothing.")
	)
	flag.IntVar(&c.Pods, "pods", 2000, "Pods of the service.")
	flag.Float64Var(&c.SurgePercent, "max-surge", 25, "The Deployment's maxSurge, percent of pods.")
	flag.IntVar(&c.XDSClients, "xds-clients", 100, "Simulated xDS clients subscribed to the service.")
	flag.IntVar(&c.DeltaClients, "delta-clients", 50, "How many of them speak delta xDS (the others state of the world).")
	flag.IntVar(&c.Watchers, "watchers", 1000, "pkg/discovery watchers of the service.")
	flag.Float64Var(&c.Rate, "rate", 100, "API writes per second of the rollout.")
	flag.DurationVar(&c.Grace, "grace", 2*time.Second, "How long an old pod stays terminating.")
	flag.IntVar(&c.Reconciles, "reconciles", 8, "The operator's --max-concurrent-reconciles.")
	flag.StringVar(&c.Operator, "operator", "bin/bench/registrar", "The registrar binary (built from ./cmd).")
	flag.IntVar(&c.ProfileSeconds, "profile-seconds", 60, "Length of the CPU profile with -profile.")
	flag.Parse()
	c.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+f+"\n", a...) }
	if *pprofAt != "" {
		go func() { c.Logf("pprof: %v", http.ListenAndServe(*pprofAt, nil)) }() //nolint:gosec // a local diagnostic
	}
	if *republish != "" {
		if err := republishFile(*republish); err != nil {
			fmt.Fprintln(os.Stderr, "rollout:", err)
			os.Exit(1)
		}
		return
	}
	if err := benchmark(c, *runs, *work, *profile, *out, *command); err != nil {
		fmt.Fprintln(os.Stderr, "rollout:", err)
		os.Exit(1)
	}
}

func benchmark(c Config, runs int, work string, profile bool, out, command string) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	var done []*Run
	for i := range runs {
		rc := c
		rc.WorkDir = filepath.Join(work, fmt.Sprintf("run-%d", i+1))
		if err := os.RemoveAll(rc.WorkDir); err != nil {
			return err
		}
		if err := os.MkdirAll(rc.WorkDir, 0o755); err != nil {
			return err
		}
		if profile {
			rc.ProfileDir = rc.WorkDir
		}
		c.Logf("run %d of %d", i+1, runs)
		r, err := runOne(context.Background(), rc)
		if err != nil {
			return fmt.Errorf("run %d: %w (logs in %s)", i+1, err, rc.WorkDir)
		}
		fmt.Println(r.line())
		done = append(done, r)
	}
	env := envelope(done, command)
	for _, row := range env.Tables[0].Rows {
		fmt.Println(strings.Join(row, " | "))
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// republishFile rebuilds the table of the envelope at path from its runs.
func republishFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var env benchfmt.Envelope[*Run]
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(env.Runs) == 0 {
		return fmt.Errorf("%s: no runs", path)
	}
	env.Tables = []benchfmt.Table{table(env.Runs)}
	if b, err = json.MarshalIndent(env, "", "  "); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func envelope(runs []*Run, command string) benchfmt.Envelope[*Run] {
	m := benchfmt.MachineFacts()
	m.LoadBefore, m.LoadAfter = runs[0].LoadBefore, runs[len(runs)-1].LoadAfter
	return benchfmt.Envelope[*Run]{
		Kind: "bench-rollout", Date: time.Now().UTC().Format(time.RFC3339), Commit: commit(), Command: command,
		Machine: m, Runs: runs, Tables: []benchfmt.Table{table(runs)},
	}
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
