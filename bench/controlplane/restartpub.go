package controlplane

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// RestartPublication is the envelope of the restart benchmark's runs (docs/bench/*.json).
type RestartPublication struct {
	benchfmt.Envelope[*RestartRun]
}

// restartColumn is one column of the restart tables: a scenario and the system it kills.
type restartColumn struct {
	scenario, title string
}

var restartColumns = []restartColumn{
	{ScenarioRestart, "registrar: restart"},
	{ScenarioFailover, "registrar: leader fail-over"},
	{ScenarioKCMRestart, "EndpointSlice controller: restart"},
}

// eventsOf are the events of a scenario over every run: with nothing changed (dying false)
// or while pods died.
func eventsOf(runs []*RestartRun, scenario string, dying bool) []RestartEvent {
	var out []RestartEvent
	for _, r := range runs {
		for _, ev := range r.Events {
			if ev.Scenario == scenario && (ev.Dying > 0) == dying {
				out = append(out, ev)
			}
		}
	}
	return out
}

// spreadOver is the spread of a figure over events (NaN where an event lacks it).
func spreadOver(events []RestartEvent, get func(RestartEvent) (float64, bool)) Spread {
	v := make([]float64, 0, len(events))
	for _, ev := range events {
		x, ok := get(ev)
		if !ok {
			x = math.NaN()
		}
		v = append(v, x)
	}
	return spreadOf(v)
}

func optional(p *float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

// methodMedians is the median count of each method over events ("GET 12, PATCH 3").
func methodMedians(events []RestartEvent) string {
	methods := map[string]bool{}
	for _, ev := range events {
		for m := range ev.APIByMethod {
			methods[m] = true
		}
	}
	med := map[string]int{}
	for _, m := range slices.Sorted(maps.Keys(methods)) {
		s := spreadOver(events, func(ev RestartEvent) (float64, bool) { return float64(ev.APIByMethod[m]), true })
		med[m] = int(math.Round(s.Median))
	}
	if len(med) == 0 {
		return "-"
	}
	return methodsCell(med)
}

// PublishRestart builds the envelope of the restart benchmark: the figures of each scenario
// side by side (median (min–max) over every run and trial) and the targets, met or missed.
func PublishRestart(kind, tableID, command, commit string, runs []*RestartRun) *RestartPublication {
	p := &RestartPublication{Envelope: benchfmt.Envelope[*RestartRun]{Kind: kind, Date: time.Now().UTC().Format(time.RFC3339), Commit: commit,
		Command: command, Runs: runs}}
	if len(runs) == 0 {
		return p
	}
	p.Machine = runs[0].Machine
	p.Machine.LoadAfter = runs[len(runs)-1].Machine.LoadAfter
	r0 := runs[0]
	var cols []restartColumn
	for _, c := range restartColumns {
		if len(eventsOf(runs, c.scenario, false))+len(eventsOf(runs, c.scenario, true)) > 0 {
			cols = append(cols, c)
		}
	}
	t := benchfmt.Table{ID: tableID,
		Title: fmt.Sprintf("%s: a controller killed (%s) and back with %d pods registered in %d registries, registrar and the EndpointSlice controller "+
			"side by side (median (min–max) over %d run(s) × the trials of each)", command, r0.Signal, r0.Pods, r0.Registries, len(runs)),
		Columns: []string{""}}
	for _, c := range cols {
		t.Columns = append(t.Columns, c.title)
	}
	row := func(label string, dying bool, format string, get func(RestartEvent) (float64, bool)) {
		cells := make([]string, 0, 1+len(cols))
		cells = append(cells, label)
		for _, c := range cols {
			cells = append(cells, spreadOver(eventsOf(runs, c.scenario, dying), get).cell(format))
		}
		t.Rows = append(t.Rows, cells)
	}
	t.Rows = append(t.Rows, kills([]string{"kills with nothing changed / while pods died"}, cols, runs))
	row("writes caused, nothing changed (target 0): store endpoint keys / EndpointSlices", false, "%.0f",
		func(ev RestartEvent) (float64, bool) { return float64(ev.WritesCaused), true })
	row("store etcd: keys written (puts + deletes; the fence, heartbeat and canary included)", false, "%.0f", func(ev RestartEvent) (float64, bool) {
		return float64(ev.StoreEtcd["etcd_mvcc_put_total"] + ev.StoreEtcd["etcd_mvcc_delete_total"]), ev.StoreEtcd != nil
	})
	row("store etcd: reads (ranges)", false, "%.0f", func(ev RestartEvent) (float64, bool) {
		return float64(ev.StoreEtcd["etcd_mvcc_range_total"]), ev.StoreEtcd != nil
	})
	row("API requests, nothing changed", false, "%.0f", func(ev RestartEvent) (float64, bool) { return float64(ev.APIRequests), true })
	cells := []string{"API requests by method (medians)"}
	for _, c := range cols {
		cells = append(cells, methodMedians(eventsOf(runs, c.scenario, false)))
	}
	t.Rows = append(t.Rows, cells)
	row("up after (s): serving /metrics; fail-over: holding the lease", false, "%.2f", func(ev RestartEvent) (float64, bool) { return optional(ev.UpSeconds) })
	row("synced after (s): initial list through the work queue", false, "%.2f", func(ev RestartEvent) (float64, bool) { return optional(ev.SyncedSeconds) })
	row("peak RSS of the serving process (MiB)", false, "%.0f", func(ev RestartEvent) (float64, bool) { return ev.PeakRSSMiB, ev.PeakRSSMiB > 0 })
	row("peak RSS before the kill (MiB): the killed process; fail-over: the standby", false, "%.0f",
		func(ev RestartEvent) (float64, bool) { return ev.PeakRSSBeforeMiB, ev.PeakRSSBeforeMiB > 0 })
	row("CPU s of the serving process in the window", false, "%.1f", func(ev RestartEvent) (float64, bool) { return ev.CPUSeconds, true })
	row("window (s): kill → synced, deaths shown, + tail", false, "%.1f", func(ev RestartEvent) (float64, bool) { return ev.WindowSeconds, true })
	row("dereg p50 of the pods dying meanwhile (ms)", true, "%.0f", func(ev RestartEvent) (float64, bool) { return ev.Dereg.P50, ev.Dereg.N > 0 })
	row("dereg p99 of the pods dying meanwhile (ms)", true, "%.0f", func(ev RestartEvent) (float64, bool) { return ev.Dereg.P99, ev.Dereg.N > 0 })
	row("same pods, API watch floor p99 (ms)", true, "%.0f", func(ev RestartEvent) (float64, bool) { return ev.Floor.P99, ev.Floor.N > 0 })
	row("same pods, the other system (not killed) p99 (ms)", true, "%.0f", func(ev RestartEvent) (float64, bool) {
		if ev.Peer == nil || ev.Peer.N == 0 {
			return 0, false
		}
		return ev.Peer.P99, true
	})
	row("while pods died: writes that showed no death", true, "%.0f", func(ev RestartEvent) (float64, bool) { return float64(ev.WritesCaused), true })
	row("while pods died: the other system's writes that showed no death", true, "%.0f", func(ev RestartEvent) (float64, bool) {
		if ev.PeerWritesNoDeath == nil {
			return 0, false
		}
		return float64(*ev.PeerWritesNoDeath), true
	})
	row("while pods died: synced after (s)", true, "%.2f", func(ev RestartEvent) (float64, bool) { return optional(ev.SyncedSeconds) })
	lost := []string{"deaths not shown when the window closed (sum)"}
	for _, c := range cols {
		n := 0
		for _, ev := range eventsOf(runs, c.scenario, true) {
			n += ev.Lost
		}
		lost = append(lost, fmt.Sprint(n))
	}
	t.Rows = append(t.Rows, lost)
	t.Notes = restartNotes(runs)
	p.Tables = []benchfmt.Table{t, restartTargets(tableID, command, cols, runs)}
	return p
}

// kills is the row counting each column's kills of both kinds.
func kills(label []string, cols []restartColumn, runs []*RestartRun) []string {
	out := label
	for _, c := range cols {
		out = append(out, fmt.Sprintf("%d / %d", len(eventsOf(runs, c.scenario, false)), len(eventsOf(runs, c.scenario, true))))
	}
	return out
}

func restartNotes(runs []*RestartRun) []string {
	r0 := runs[0]
	loads := make([]string, 0, len(runs))
	created := make([]string, 0, len(runs))
	for _, r := range runs {
		loads = append(loads, fmt.Sprintf("%.1f→%.1f", r.Machine.LoadBefore[0], r.Machine.LoadAfter[0]))
		created = append(created, fmt.Sprintf("%.0f", r.SetupSeconds))
	}
	failover := "the binary's defaults: lease 15 s, renew deadline 10 s, retry 2 s"
	if len(r0.FailoverArgs) > 0 {
		failover = strings.Join(r0.FailoverArgs, " ")
	}
	n := []string{
		fmt.Sprintf("one run is one control plane: %d pods created ready (registries = pods / 10, over %d namespaces), every pod registered in the store and "+
			"listed ready by the EndpointSlices (setup took %s s per run); then, on it, each scenario's trials, each trial a kill with nothing changed and "+
			"a kill while %d pods died (half deleted, half turned unready, spread over %.0f s from just after the kill)",
			r0.Pods, r0.Namespaces, strings.Join(created, ", "), r0.Dying, r0.DyingOverSeconds),
		fmt.Sprintf("restart: registrar's one replica (no leader election, as the harness runs it) sent %s and started again at once; "+
			"fail-over: two replicas with --leader-elect (%s), the leader sent %s, the standby (its caches warm) takes over, "+
			"and the killed one comes back as the next standby; EndpointSlice controller: kube-controller-manager running only it (no leader election) "+
			"sent %s and started again at once", r0.Signal, failover, r0.Signal, r0.Signal),
		"fail-over timing: a standby takes the lease once it has not seen it renewed for the lease duration, and it looks every retry period " +
			"stretched by a random jitter of up to 1.2 periods (client-go's leader election): with the defaults (15 s, 2 s) a crashed leader's " +
			"successor leads some 13 to 24 s after the crash; a graceful stop (-restart-signal TERM) releases the lease at once",
		"writes caused: the killed system's writes a separate watcher saw in the window (registrar: endpoint keys under the prefix, from an etcd watch; " +
			"its own fence, heartbeat and canary keys are not endpoints and are counted only in the store etcd's row; EndpointSlice: every create, " +
			"update and delete of the controller's slices, from an API watch) less the writes that showed a dying pod's deregistration",
		"store etcd rows: the difference of two scrapes of the store etcd's /metrics around the window (etcd_mvcc_put_total + etcd_mvcc_delete_total; " +
			"etcd_mvcc_range_total): every key the operator wrote, its periodic heartbeat (every 5 s) and canary (every 10 s) included, and its reads",
		"API requests: the serving process's own client-go counter (rest_client_requests_total by method; LISTs and WATCHes are GETs): for a restarted " +
			"process every request since it started, for the standby the difference over the window; the API server's apiserver_request_total " +
			"does not say which client asked",
		"synced: from the kill until the serving process's /metrics show its work queue (registrar: the serviceregistry controller's; " +
			"kube-controller-manager: endpoint_slice) took in at least one item per object of its initial list (registries; Services) and finished as many, " +
			"and holds nothing queued or in flight: its initial list has been reconciled against the store (registrar) or the slices (EndpointSlice); " +
			"polled every 100 ms; in a fail-over also after the standby reports holding the lease (leader_election_master_status)",
		"peak RSS: VmHWM of the serving process at the end of the window; for a restarted process that is its initial list's peak; a standby's " +
			"includes its own start (it lists and caches before it leads), so the row before the kill shows what the takeover added",
		"dereg: from the API write that killed the pod (delete or status patch) until the killed system showed the endpoint gone, seen by a separate " +
			"watcher process; the API watch floor is the same pods' write seen by a plain pod watch; the other system is the controller that was not killed",
		fmt.Sprintf("workers: registrar --max-concurrent-reconciles=%d, kube-controller-manager --concurrent-service-endpoint-syncs=%d; "+
			"1-minute load average before→after per run: %s", r0.Reconciles, r0.Reconciles, strings.Join(loads, ", ")),
	}
	for i, r := range runs {
		for _, w := range r.Warnings {
			n = append(n, fmt.Sprintf("run %d: %s", i+1, w))
		}
	}
	return n
}

// restartTargets is issue 39 §3's target for each scenario: a kill with nothing changed
// causes no write.
func restartTargets(tableID, command string, cols []restartColumn, runs []*RestartRun) benchfmt.Table {
	t := benchfmt.Table{ID: tableID + "-targets", Title: fmt.Sprintf("%s: the target of issue 39 §3, per scenario", command),
		Columns: []string{"target", "scenario", "measured", "verdict"}}
	for _, c := range cols {
		evs := eventsOf(runs, c.scenario, false)
		if len(evs) == 0 {
			continue
		}
		what := "store endpoint keys"
		if c.scenario == ScenarioKCMRestart {
			what = "EndpointSlice writes"
		}
		caused := spreadOver(evs, func(ev RestartEvent) (float64, bool) { return float64(ev.WritesCaused), true })
		t.Rows = append(t.Rows, []string{"writes caused by a kill with nothing changed = 0", c.title,
			fmt.Sprintf("%s: %s per kill (max %.0f, %d kills)", what, caused.cell("%.0f"), caused.Max, len(evs)), verdict(caused.Max == 0)})
	}
	t.Notes = []string{"met only when every kill of every run caused none; the deaths' own writes are not counted (see the table above)"}
	return t
}

// WriteJSON writes the publication to path.
func (p *RestartPublication) WriteJSON(path string) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode publication: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteSummary prints the tables.
func (p *RestartPublication) WriteSummary(out io.Writer) {
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
}
