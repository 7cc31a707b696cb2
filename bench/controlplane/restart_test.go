package controlplane

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestQueueSynced(t *testing.T) {
	const registrar = `# TYPE workqueue_adds_total counter
workqueue_adds_total{controller="serviceregistry",name="serviceregistry"} 12
workqueue_adds_total{controller="deployment",name="deployment"} 99
workqueue_depth{controller="serviceregistry",name="serviceregistry",priority=""} 0
workqueue_depth{controller="serviceregistry",name="serviceregistry",priority="-100"} %s
workqueue_unfinished_work_seconds{controller="serviceregistry",name="serviceregistry"} %s
workqueue_work_duration_seconds_count{controller="serviceregistry",name="serviceregistry"} 11
workqueue_work_duration_seconds_sum{controller="serviceregistry",name="serviceregistry"} 0.5
`
	for _, tc := range []struct {
		name              string
		depth, unfinished string
		want              int
		synced            bool
	}{
		{"idle, every registry processed", "0", "0", 10, true},
		{"a low-priority item queued", "1", "0", 10, false},
		{"work in flight", "0", "0.02", 10, false},
		{"fewer finished than the initial list", "0", "0", 12, false},
		{"nothing to list", "0", "0", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(strings.Replace(registrar, "%s", tc.depth, 1), "%s", tc.unfinished, 1)
			q := queueOf(parse(t, text), registrarQueue)
			if q.Adds != 12 || q.Done != 11 {
				t.Errorf("queue %+v: want 12 adds and 11 done (the deployment queue left out)", q)
			}
			if got := q.synced(tc.want); got != tc.synced {
				t.Errorf("synced(%d) = %v for %+v, want %v", tc.want, got, q, tc.synced)
			}
		})
	}
	// kube-controller-manager's queue is named, not labelled with a controller.
	kcm := parse(t, `workqueue_adds_total{name="endpoint_slice"} 3
workqueue_adds_total{name="endpoint_slice_mirroring"} 7
workqueue_depth{name="endpoint_slice"} 0
workqueue_unfinished_work_seconds{name="endpoint_slice"} 0
workqueue_work_duration_seconds_count{name="endpoint_slice"} 3
`)
	if q := queueOf(kcm, endpointSliceQueue); !q.synced(3) || q.Adds != 3 {
		t.Errorf("endpoint_slice queue %+v: want synced with 3 adds", q)
	}
	if q := queueOf(nil, registrarQueue); q.synced(1) {
		t.Error("a process without the queue (a standby) counts as synced")
	}
}

func TestRequestsAndCounters(t *testing.T) {
	before := requestsByMethod(parse(t, `rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 10
rest_client_requests_total{code="201",host="127.0.0.1:1",method="POST"} 2
rest_client_requests_total{code="200",host="127.0.0.1:1",method="PUT"} 4
`))
	after := requestsByMethod(parse(t, `rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 13
rest_client_requests_total{code="404",host="127.0.0.1:1",method="GET"} 1
rest_client_requests_total{code="201",host="127.0.0.1:1",method="POST"} 2
rest_client_requests_total{code="200",host="127.0.0.1:1",method="PUT"} 6
rest_client_requests_total{code="200",host="127.0.0.1:1",method="PATCH"} 5
leader_election_master_status{name="registrar.registrar.dev"} 0
`))
	got := countsBetween(before, after)
	want := map[string]int{"GET": 4, "PUT": 2, "PATCH": 5}
	if len(got) != len(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d, want %d (all %v)", k, got[k], v, got)
		}
	}
	if n := total(got); n != 11 {
		t.Errorf("total %d, want 11", n)
	}
	if cell := methodsCell(got); cell != "PATCH 5, GET 4, PUT 2" {
		t.Errorf("methods cell %q", cell)
	}
	// A counter that went down belongs to a new process: all of it counts.
	if got := countsBetween(map[string]float64{"GET": 100}, map[string]float64{"GET": 7}); got["GET"] != 7 {
		t.Errorf("restarted counter: %v, want GET 7", got)
	}
	if leading(parse(t, `leader_election_master_status{name="x"} 0`)) || !leading(parse(t, `leader_election_master_status{name="x"} 1`)) {
		t.Error("leading misread leader_election_master_status")
	}
	etcd := countersOf(parse(t, "etcd_mvcc_put_total 5\netcd_mvcc_delete_total 2\netcd_mvcc_txn_total 3\n"), storeEtcdCounters)
	if etcd["etcd_mvcc_put_total"] != 5 || etcd["etcd_mvcc_range_total"] != 0 {
		t.Errorf("store counters %v", etcd)
	}
}

// A tracker's writes are explained when they show a pending transition: a store event
// (one write, one key) or an EndpointSlice write that lists several pods' changes.
func TestTrackerWriteCounts(t *testing.T) {
	tr := NewTracker()
	now := time.Now()
	tr.Expect("ns/a", CauseDelete, now)
	tr.Expect("ns/b", CauseUnready, now)
	tr.Write() // a rewrite of a key nothing called for
	tr.Unexpected()
	tr.Write() // the slice write that dropped both a and b
	tr.Observe("ns/a", Deregister, now.Add(time.Millisecond))
	tr.Observe("ns/b", Deregister, now.Add(time.Millisecond))
	tr.Write() // a write of nothing the watch tracks
	if w, e := tr.WriteCounts(); w != 3 || e != 1 {
		t.Errorf("writes %d, explained %d; want 3 and 1", w, e)
	}
}

func restartEvent(scenario, system string, dying, caused int, synced, p99 float64) RestartEvent {
	return RestartEvent{Scenario: scenario, System: system, Trial: 1, Dying: dying, SyncedSeconds: &synced, UpSeconds: &synced,
		Writes: caused + dying, WritesForDeaths: dying, WritesCaused: caused, APIRequests: 10, APIByMethod: map[string]int{"GET": 8, "PATCH": 2},
		PeakRSSMiB: 50, PeakRSSBeforeMiB: 40, CPUSeconds: 1, WindowSeconds: 8,
		Dereg: LagStats{N: dying, P50: p99 / 2, P99: p99}, Floor: LagStats{N: dying, P99: 5}}
}

func TestPublishRestart(t *testing.T) {
	run := func(kcmCaused int, syncedReg float64) *RestartRun {
		return &RestartRun{Pods: 200, Registries: 20, Namespaces: 2, Dying: 10, DyingOverSeconds: 3, Signal: signalName(syscall.SIGKILL), Reconciles: 8,
			Events: []RestartEvent{
				restartEvent(ScenarioRestart, SystemRegistrar, 0, 0, syncedReg, 0),
				restartEvent(ScenarioRestart, SystemRegistrar, 10, 0, syncedReg+1, 300),
				restartEvent(ScenarioKCMRestart, SystemEndpointSlice, 0, kcmCaused, 2, 0),
				restartEvent(ScenarioKCMRestart, SystemEndpointSlice, 10, kcmCaused, 3, 900),
				restartEvent(ScenarioFailover, SystemRegistrar, 0, 0, 16, 0),
				restartEvent(ScenarioFailover, SystemRegistrar, 10, 0, 17, 15000),
			}}
	}
	p := PublishRestart(KindRestart, "bench-restart", "make bench-restart", "abc", []*RestartRun{run(0, 1), run(20, 3), run(0, 2)})
	if len(p.Tables) != 2 || p.Tables[0].ID != "bench-restart" || p.Tables[1].ID != "bench-restart-targets" {
		t.Fatalf("tables %+v", p.Tables)
	}
	main := p.Tables[0]
	if got, want := main.Columns, []string{"", "registrar: restart", "registrar: leader fail-over", "EndpointSlice controller: restart"}; !slicesEqual(got, want) {
		t.Errorf("columns %q, want %q", got, want)
	}
	rows := map[string][]string{}
	for _, r := range main.Rows {
		if len(r) != len(main.Columns) {
			t.Errorf("row %q has %d cells for %d columns", r, len(r), len(main.Columns))
		}
		rows[r[0]] = r[1:]
	}
	for label, want := range map[string][]string{
		"kills with nothing changed / while pods died":                                    {"3 / 3", "3 / 3", "3 / 3"},
		"writes caused, nothing changed (target 0): store endpoint keys / EndpointSlices": {"0", "0", "0 (0–20)"},
		"synced after (s): initial list through the work queue":                           {"2.00 (1.00–3.00)", "16.00", "2.00"},
		"dereg p99 of the pods dying meanwhile (ms)":                                      {"300", "15000", "900"},
		"API requests by method (medians)":                                                {"GET 8, PATCH 2", "GET 8, PATCH 2", "GET 8, PATCH 2"},
		"store etcd: reads (ranges)":                                                      {"-", "-", "-"},
	} {
		if got := rows[label]; !slicesEqual(got, want) {
			t.Errorf("%s: %q, want %q", label, got, want)
		}
	}
	verdicts := map[string]string{}
	for _, r := range p.Tables[1].Rows {
		verdicts[r[1]] = r[3]
	}
	if verdicts["registrar: restart"] != "met" || verdicts["registrar: leader fail-over"] != "met" || verdicts["EndpointSlice controller: restart"] != "missed" {
		t.Errorf("verdicts %v: want registrar met, EndpointSlice missed (one run caused 20 writes)", verdicts)
	}
}

func TestRestartConfigValidate(t *testing.T) {
	c := Config{Pods: 250, EndpointSlice: true}
	rc := RestartConfig{Dying: 100}
	rc.Defaults()
	if err := rc.validate(&c); err == nil {
		t.Error("300 deaths of 250 pods accepted")
	}
	rc = RestartConfig{Dying: 50, Scenarios: []string{ScenarioKCMRestart}}
	rc.Defaults()
	if err := rc.validate(&Config{Pods: 250}); err == nil {
		t.Error("the kcm restart without the EndpointSlice controller accepted")
	}
	rc = RestartConfig{Scenarios: []string{"reboot"}}
	rc.Defaults()
	if err := rc.validate(&c); err == nil {
		t.Error("an unknown scenario accepted")
	}
}
