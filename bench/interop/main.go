// Command interop writes the measurement envelope (docs/bench, see bench/benchdoc) of
// `make test-interop INTEROP_RUNS=N INTEROP_DOC=...` from the result files of its runs
// (bin/interop/result-N.json, written by test/interop): per run, how soon the real Spring
// Cloud callers stopped listing and picking a pod made unready, deleted or node-lost, how soon
// each of 1,000 changes was in /eureka/apps/delta, and the Eureka client's full fetches and
// hash code mismatches during them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// result is test/interop's INTEROP_OUT (spring_test.go, type results).
type result struct {
	FetchIntervalSeconds    int     `json:"fetchIntervalSeconds"`
	LBCacheTTLSeconds       float64 `json:"loadBalancerCacheTTLSeconds"`
	NodeLeaseTimeoutSeconds float64 `json:"nodeLeaseTimeoutSeconds"`
	Leaves                  []struct {
		What          string  `json:"what"`
		Pod           string  `json:"pod"`
		Store         float64 `json:"store"`
		EurekaList    float64 `json:"eurekaGetInstances"`
		EurekaPick    float64 `json:"eurekaLoadBalancer"`
		ZooKeeperList float64 `json:"zookeeperGetInstances"`
		ZooKeeperPick float64 `json:"zookeeperLoadBalancer"`
	} `json:"leaves"`
	Changes *struct {
		Changes      int `json:"changes"`
		DeltaLatency struct {
			N   int     `json:"n"`
			P50 float64 `json:"p50"`
			P99 float64 `json:"p99"`
			Max float64 `json:"max"`
		} `json:"deltaLatencySeconds"`
		ServerCPUWait float64 `json:"serverCPUWaitShare"`
		TestCPUWait   float64 `json:"testCPUWaitShare"`
		Overloaded    bool    `json:"overloaded"`
		Before        counts  `json:"before"`
		After         counts  `json:"after"`
	} `json:"changes"`
}

type counts struct {
	ClientFull            int     `json:"clientFullFetches"`
	ClientDeltas          int     `json:"clientDeltas"`
	ClientMismatches      int     `json:"clientHashCodeMismatches"`
	ClientMismatchCounter float64 `json:"clientMismatchCounter"`
	ServerFull            float64 `json:"serverFullFetches"`
	ServerDelta           float64 `json:"serverDeltaFetches"`
}

func main() {
	dir := flag.String("dir", "bin/interop", "directory of the result-N.json files")
	out := flag.String("out", "", "envelope to write")
	before := flag.String("load-before", "", "load average before the runs (l1 l5 l15)")
	after := flag.String("load-after", "", "load average after the runs")
	command := flag.String("command", "make test-interop", "the command that ran")
	flag.Parse()
	if err := run(*dir, *out, *before, *after, *command); err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		os.Exit(1)
	}
}

func run(dir, out, before, after, command string) error {
	files, err := filepath.Glob(filepath.Join(dir, "result-*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no result-*.json in %s", dir)
	}
	sort.Strings(files)
	var runs []result
	var leaves, changes [][]string
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		runs = append(runs, r)
		name := strconv.Itoa(i + 1)
		for _, what := range []string{"unready", "deleted", "node lost"} {
			var el, ep, zl, zp, st []float64
			for _, l := range r.Leaves {
				if l.What == what {
					el, ep, zl, zp, st = append(el, l.EurekaList), append(ep, l.EurekaPick), append(zl, l.ZooKeeperList), append(zp, l.ZooKeeperPick), append(st, l.Store)
				}
			}
			if len(el) == 0 {
				continue
			}
			leaves = append(leaves, []string{name, fmt.Sprintf("%d s", r.FetchIntervalSeconds), fmt.Sprintf("%s (%d)", what, len(el)),
				span(st), span(el), span(ep), span(zl), span(zp)})
		}
		if c := r.Changes; c != nil {
			lat := fmt.Sprintf("%.1f / %.1f / %.1f", 1000*c.DeltaLatency.P50, 1000*c.DeltaLatency.P99, 1000*c.DeltaLatency.Max)
			if c.Overloaded {
				lat += " (overloaded: not asserted)"
			}
			changes = append(changes, []string{name, strconv.Itoa(c.Changes), lat,
				strconv.Itoa(c.After.ClientDeltas - c.Before.ClientDeltas),
				strconv.Itoa(c.After.ClientFull - c.Before.ClientFull),
				fmt.Sprintf("%d (counter %.0f)", c.After.ClientMismatches-c.Before.ClientMismatches, c.After.ClientMismatchCounter-c.Before.ClientMismatchCounter),
				fmt.Sprintf("%.0f", c.After.ServerFull-c.Before.ServerFull),
				fmt.Sprintf("%.0f / %.0f", 100*c.ServerCPUWait, 100*c.TestCPUWait)})
		}
	}
	r0 := runs[0]
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	m := benchfmt.MachineFacts()
	m.LoadBefore, m.LoadAfter = load(before), load(after)
	env := benchfmt.Envelope[result]{
		Kind: "interop", Date: time.Now().UTC().Format(time.RFC3339), Commit: strings.TrimSpace(string(commit)),
		Command: command, Machine: m, Runs: runs,
		Tables: []benchfmt.Table{
			{
				ID: "interop-leave",
				Title: fmt.Sprintf("make test-interop: a pod made ineligible -> the real Spring Cloud callers stop listing and picking it "+
					"(seconds, min-max over the events of a run; Eureka client fetch interval %d s, LoadBalancer cache TTL %g s)",
					r0.FetchIntervalSeconds, r0.LBCacheTTLSeconds),
				Columns: []string{"run", "fetch interval", "fault (events)", "store deleted", "Eureka getInstances()", "Eureka LoadBalancer",
					"ZooKeeper getInstances()", "ZooKeeper LoadBalancer"},
				Rows: leaves,
				Notes: []string{
					"From the pod's status write (unready), its deletion, or its node's last Lease renewal (node lost; the operator's " +
						fmt.Sprintf("--node-lease-timeout is %g s) to the first poll (every 25 ms) of the caller's HTTP endpoint ", r0.NodeLeaseTimeoutSeconds) +
						"that no longer lists it in DiscoveryClient.getInstances() / no longer returns it from 12 LoadBalancerClient.choose() calls.",
					"Eureka: Spring Cloud Netflix 5.0.3 (eureka-client 2.0.6) reading cmd/eureka-api, which follows the etcd store; " +
						"ZooKeeper: Spring Cloud Zookeeper 5.0.2 (Curator) reading the ZooKeeper store. Spring Boot 4.0.7, JDK 17. " +
						"envtest's kube-apiserver and host processes on a shared 2-core machine under the load shown; no kubelet.",
				},
			},
			{
				ID:    "interop-delta",
				Title: "make test-interop: readiness flips through the API server and the operator, read by the real Eureka client",
				Columns: []string{"run", "changes", "etcd change -> in /eureka/apps/delta (ms, p50 / p99 / max)", "deltas the client applied",
					"full fetches by the client", "hash code mismatches (log, Spectator counter)", "full fetches the server answered",
					"CPU wait share, eureka-api / test (%)"},
				Rows: changes,
				Notes: []string{
					"One change at a time: the test waits for the operator's etcd write (its own watch), then polls /eureka/apps/delta every 2 ms " +
						"until the instance shows the new actionType. Meanwhile the Eureka client fetches its delta every fetch interval and " +
						"checks its hash code; its full fetches and mismatches are counted from its own log lines " +
						"(\"Getting all instance registry info\", \"The Reconcile hashcodes do not match\") and DiscoveryClient_ReconcileHashCodeMismatch.",
					"CPU wait share: of the time eureka-api and the test process wanted a CPU during the changes, the share they waited " +
						"for one (/proc/PID/task/*/schedstat); over 85 % with a p99 over 100 ms the bound is reported, not asserted, " +
						"and the row says so: the tail is then the machine's run queue.",
				},
			},
		},
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// span is "min-max" of seconds (one value alone).
func span(v []float64) string {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	if len(v) == 1 {
		return fmt.Sprintf("%.2f", lo)
	}
	return fmt.Sprintf("%.2f-%.2f", lo, hi)
}

func load(s string) [3]float64 {
	var out [3]float64
	f := strings.Fields(strings.ReplaceAll(s, ",", " "))
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}
