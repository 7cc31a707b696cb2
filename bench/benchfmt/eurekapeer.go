package benchfmt

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// EurekaPeerRun is the raw result of one run of the real-Eureka comparison (make
// bench-eureka-peer, test/eurekapeer): every scenario's fault hit one instance of every setup
// at the same moment, and each setup's two callers (fetch interval 30 s and 5 s) recorded
// every request.
type EurekaPeerRun struct {
	Started     string     `json:"started"` // RFC 3339, UTC
	WallSeconds float64    `json:"wall_seconds"`
	LoadBefore  [3]float64 `json:"load_before"`
	LoadAfter   [3]float64 `json:"load_after"`
	// RestoredAfter is when the lost instances were let run again, from the fault (s): once
	// every caller had stopped picking them, or at the cap.
	RestoredAfter float64 `json:"lost_restored_after_s"`
	// SelfPreservation counts, per Eureka server, the eviction ticks (one a minute) it skipped
	// during the run because renewals were under its threshold: 0 means nothing hid an eviction.
	SelfPreservation map[string]int   `json:"self_preservation_ticks"`
	Cells            []EurekaPeerCell `json:"cells"`
}

// EurekaPeerCell is what one caller saw of one scenario in one run.
type EurekaPeerCell struct {
	Scenario string `json:"scenario"` // graceful, sigkill, hang, lost
	Setup    string `json:"setup"`    // registrar, eureka, eureka-5-15
	Fetch    int    `json:"fetch_s"`  // the caller's registry fetch interval (s)
	Requests int    `json:"requests"` // sent from the fault to the end of the run
	Failed   int    `json:"failed"`
	NoTarget int    `json:"no_target"` // the load balancer had no instance (counted in Failed)
	// Overload counts the requests the caller did not send: too many in flight (the loaded
	// machine starved it); not in Requests or Failed.
	Overload int `json:"overload"`
	// StopSeconds is the fault → the caller's last pick of the instance before it stopped
	// picking it (a gap of at least GapSeconds that began while the fault lasted); nil: never.
	StopSeconds *float64 `json:"stop_picking_s"`
	// LastFailSeconds is the fault → the last failed request (nil: none failed).
	LastFailSeconds *float64 `json:"last_failed_s"`
	GapSeconds      float64  `json:"gap_s"`
}

// EurekaPeer scenario and setup names, in the table's order.
var (
	EurekaPeerScenarios = []string{"graceful", "sigkill", "hang", "lost"}
	EurekaPeerSetups    = []string{"registrar", "eureka", "eureka-5-15"}
	EurekaPeerFetches   = []int{30, 5}
)

var eurekaPeerScenarioTitle = map[string]string{
	"graceful": "graceful shutdown (deregister, 70 s drain)",
	"sigkill":  "SIGKILL (restarted at once)",
	"hang":     "hung process (SIGSTOP 15 s)",
	"lost":     "lost node (SIGSTOP, no more renewals or status)",
}

var eurekaPeerSetupTitle = map[string]string{
	"registrar":   "registrar → its Eureka API",
	"eureka":      "Eureka server 5.0.3, defaults (30 s renew, 90 s lease)",
	"eureka-5-15": "Eureka server 5.0.3, 5 s renew, 15 s lease",
}

// EurekaPeerTable is the table of the runs: per scenario and setup, failed requests and fault
// → the caller stops picking the address, at both fetch intervals, median (min–max).
func EurekaPeerTable(runs []EurekaPeerRun) Table {
	t := Table{
		ID:    "eureka-peer",
		Title: "Real Spring Cloud Netflix Eureka vs registrar's Eureka API, same Spring caller, 50 req/s",
		Columns: []string{"scenario", "setup", "failed, fetch 30 s", "fault → stops picking, fetch 30 s",
			"failed, fetch 5 s", "fault → stops picking, fetch 5 s"},
	}
	for _, sc := range EurekaPeerScenarios {
		for _, setup := range EurekaPeerSetups {
			row := make([]string, 0, 2+2*len(EurekaPeerFetches))
			row = append(row, eurekaPeerScenarioTitle[sc], eurekaPeerSetupTitle[setup])
			for _, fetch := range EurekaPeerFetches {
				var failed []float64
				var stops []*float64
				for _, r := range runs {
					for _, c := range r.Cells {
						if c.Scenario == sc && c.Setup == setup && c.Fetch == fetch {
							failed = append(failed, float64(c.Failed))
							stops = append(stops, c.StopSeconds)
						}
					}
				}
				row = append(row, spread(failed, "%.0f", ""), stopSpread(stops))
			}
			t.Rows = append(t.Rows, row)
		}
	}
	walls := make([]string, 0, len(runs))
	loads := make([]string, 0, len(runs))
	restored := make([]string, 0, len(runs))
	sp := make([]string, 0, len(runs))
	overload := 0
	for i, r := range runs {
		sp = append(sp, fmt.Sprintf("run %d: %d (defaults), %d (5 s / 15 s)", i+1, r.SelfPreservation["eureka"], r.SelfPreservation["eureka-5-15"]))
		for _, c := range r.Cells {
			overload += c.Overload
		}
		walls = append(walls, fmt.Sprintf("%.0f s", r.WallSeconds))
		loads = append(loads, fmt.Sprintf("run %d: %v → %v", i+1, r.LoadBefore, r.LoadAfter))
		restored = append(restored, fmt.Sprintf("%.0f s", r.RestoredAfter))
	}
	t.Notes = []string{
		fmt.Sprintf("%d runs; each cell is the median, (min–max) the spread over the runs. Wall time of a run: %s.", len(runs), strings.Join(walls, ", ")),
		"Load average (1, 5, 15 min) before → after each run: " + strings.Join(loads, "; ") + ". A shared 2-core machine under other work.",
		"Everything runs as processes on one host, as VM estates run Eureka: the Eureka servers (a stock " +
			"`@EnableEurekaServer` application, Spring Boot 4.0.7, Spring Cloud 2025.1.4) and the instances (the real " +
			"Eureka client registering itself). registrar's side is real too: kube-apiserver and etcd, the operator, " +
			"`cmd/eureka-api`; the driver plays the kubelet (readiness probe every 1 s, 1 s timeout, one failure marks the " +
			"pod unready; node Lease renewed every 10 s, 40 s duration; the operator's default `--node-lease-timeout` " +
			"20 s).",
		"One Spring Boot caller per setup and fetch interval (`eureka.client.registry-fetch-interval-seconds` 30, its " +
			"default, with Spring Cloud LoadBalancer's default 35 s cache; or 5, with the cache TTL at 5 s too), reading " +
			"either Eureka server or registrar's Eureka API; 50 req/s per scenario, round robin over the fault's instance " +
			"and one that stays healthy, 2 s timeout.",
		"All scenarios and setups are hit at the same moment; each Eureka server also holds 30 filler instances " +
			"renewing on time, so self-preservation (85 % of expected renewals) does not hide the eviction. The Eureka " +
			"servers run their defaults except `wait-time-in-ms-when-sync-empty=0` (a standalone server otherwise refuses " +
			"reads for 5 min after its start); the tuned one also has `expected-client-renewal-interval-seconds=5` as " +
			"Spring Cloud's docs ask with a 5 s renewal.",
		"Graceful: the instance deregisters on SIGTERM (Eureka: the client's cancel; registrar: the pod's deletion) " +
			"and serves 70 s more. SIGKILL: restarted at once (systemd, the kubelet). Hung: SIGSTOP for 15 s. Lost node: " +
			"SIGSTOP and, on registrar's side, no more Lease renewals or pod status; let run again once every caller " +
			"stopped picking it (after " + strings.Join(restored, ", ") + ").",
		"Eviction ticks the Eureka servers skipped in self-preservation during the runs: " + strings.Join(sp, "; ") +
			fmt.Sprintf(". Requests a caller could not send (over 400 in flight: the machine starved it), all runs: %d.", overload),
		"fault → stops picking: from the fault to the caller's last pick of the address before a gap of 3 s or more in " +
			"its picks; 'never' when it kept picking it (it came back before the caller noticed). Failed counts every " +
			"failed request of the scenario's service from the fault to the end of the run (connection refused, " +
			"2 s timeout).",
	}
	return t
}

// spread is "median (min–max)" of vs with format f and unit u.
func spread(vs []float64, f, u string) string {
	if len(vs) == 0 {
		return "–"
	}
	s := slices.Clone(vs)
	sort.Float64s(s)
	med := s[(len(s)-1)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf(f+"%s ("+f+"–"+f+"%s)", med, u, s[0], s[len(s)-1], u)
}

// stopSpread is spread over the runs that stopped picking, with how many did when not all.
func stopSpread(stops []*float64) string {
	var vs []float64
	for _, s := range stops {
		if s != nil {
			vs = append(vs, *s)
		}
	}
	switch {
	case len(stops) == 0:
		return "–"
	case len(vs) == 0:
		return "never"
	case len(vs) < len(stops):
		return fmt.Sprintf("%s in %d/%d runs, else never", spread(vs, "%.1f", " s"), len(vs), len(stops))
	}
	return spread(vs, "%.1f", " s")
}
