// Command bench runs registrar's benchmark (see test/bench and `make bench`): it prints a
// table and writes bench-results.json.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/registrar-dev/registrar/test/bench"
)

func main() {
	var c bench.Config
	var out string
	flag.IntVar(&c.Pods, "pods", 1000, "Pods.")
	flag.IntVar(&c.Registries, "registries", 100, "ServiceRegistries (and Services).")
	flag.IntVar(&c.Namespaces, "namespaces", 10, "Namespaces the registries are spread over.")
	flag.Float64Var(&c.Rate, "rate", 500, "Offered transitions per second.")
	flag.IntVar(&c.Writers, "writers", 64, "API writes in flight at most.")
	flag.StringVar(&c.Operator, "operator", "bin/bench/registrar", "registrar binary (go build -o ... ./cmd).")
	flag.BoolVar(&c.EndpointSlice, "endpointslice", true, "Run kube-controller-manager's EndpointSlice controller side by side.")
	flag.StringVar(&c.ControllerManager, "kube-controller-manager", filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager"), "kube-controller-manager binary.")
	kcmArgs := flag.String("kcm-args", strings.Join(bench.KCMDefaultArgs, " "), "Extra kube-controller-manager flags (space-separated).")
	opArgs := flag.String("operator-args", "", "Extra registrar flags (space-separated).")
	flag.IntVar(&c.TTLSample, "ttl-sample", 100, "Pods that also run a self-registration TTL instance (0: no TTL peer).")
	flag.DurationVar(&c.TTL, "ttl", 15*time.Second, "TTL of the TTL registry's leases (keepalive every TTL/3).")
	flag.DurationVar(&c.RoundTimeout, "round-timeout", 2*time.Minute, "Longest wait for a round's transitions to show.")
	flag.StringVar(&c.WorkDir, "workdir", "bin/bench/run", "Logs, kubeconfigs and data of the run (emptied first).")
	flag.StringVar(&c.ProfileDir, "profile-dir", "", "Write the operator's CPU and heap profiles here.")
	flag.IntVar(&c.ProfileSeconds, "profile-seconds", 30, "Length of the CPU profile, from the start of the measured phase.")
	flag.Int64Var(&c.Seed, "seed", 1, "Seed of the transition order.")
	flag.StringVar(&out, "out", "bin/bench/bench-results.json", "Where the JSON results go.")
	flag.Parse()
	c.KCMArgs = strings.Fields(*kcmArgs)
	c.OperatorArgs = strings.Fields(*opArgs)
	c.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	if err := run(c, out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(c bench.Config, out string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.RemoveAll(c.WorkDir); err != nil {
		return err
	}
	start := time.Now()
	res, err := bench.Run(ctx, c)
	if err != nil {
		return err
	}
	res.Command = strings.Join(os.Args, " ")
	res.WriteTable(os.Stdout)
	fmt.Printf("run took %s; results in %s\n", time.Since(start).Round(time.Second), out)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return res.WriteJSON(out)
}
