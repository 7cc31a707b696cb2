package controlplane

import (
	"encoding/json"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
)

var inf = math.Inf(1)

func TestBucketQuantile(t *testing.T) {
	// Cumulative counts; bounds in seconds as etcd's (1 ms, doubling), results in seconds,
	// computed by hand the way PromQL's histogram_quantile does.
	spread := []bucket{{0.001, 50}, {0.002, 98}, {0.004, 100}, {inf, 100}}
	for _, tc := range []struct {
		name    string
		q       float64
		buckets []bucket
		want    float64 // NaN: none
	}{
		{"empty histogram: no buckets", 0.99, nil, math.NaN()},
		{"no observations", 0.99, []bucket{{0.001, 0}, {0.002, 0}, {inf, 0}}, math.NaN()},
		{"only the +Inf bucket", 0.99, []bucket{{inf, 10}}, math.NaN()},
		{"no +Inf bucket", 0.99, []bucket{{0.001, 5}, {0.002, 10}}, math.NaN()},
		{"all in the +Inf bucket: the largest finite bound", 0.99, []bucket{{0.001, 0}, {0.002, 0}, {0.004, 0}, {inf, 10}}, 0.004},
		{"rank in the +Inf bucket: the largest finite bound", 0.99, []bucket{{0.001, 90}, {0.002, 95}, {inf, 100}}, 0.002},
		// One bucket: 100 observations ≤ 4 ms, interpolated from 0: rank 99 of 100.
		{"one bucket, p99", 0.99, []bucket{{0.004, 100}, {inf, 100}}, 0.004 * 0.99},
		{"one bucket, p50", 0.5, []bucket{{0.004, 100}, {inf, 100}}, 0.002},
		// 50 ≤ 1 ms, 48 in (1, 2], 2 in (2, 4].
		{"p50: rank 50 ends the lowest bucket", 0.5, spread, 0.001},
		{"p90: rank 90 is 40 of the 48 in (1, 2] ms", 0.9, spread, 0.001 + 0.001*40/48},
		{"p99: rank 99 is 1 of the 2 in (2, 4] ms", 0.99, spread, 0.003},
		{"p100: the bound of the last bucket with observations", 1, spread, 0.004},
		{"decreasing counts are raised to the previous bucket's", 0.99, []bucket{{0.001, 10}, {0.002, 8}, {inf, 10}}, 0.001 * 0.99},
		{"a lowest bound ≤ 0 is returned as is", 0.1, []bucket{{0, 5}, {0.001, 10}, {inf, 10}}, 0},
		{"q > 1", 1.5, spread, inf},
		{"q < 0", -0.5, spread, math.Inf(-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := bucketQuantile(tc.q, tc.buckets)
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && got != tc.want && math.Abs(got-tc.want) > 1e-12) {
				t.Errorf("bucketQuantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

// The quantile of a phase is that of the difference of two readings of the cumulative buckets.
func TestQuantileMsOfDifference(t *testing.T) {
	before := histogram{0.001: 1000, 0.002: 1000, 0.004: 1000, inf: 1000}
	after := histogram{0.001: 1050, 0.002: 1098, 0.004: 1100, inf: 1100}
	for _, tc := range []struct {
		name          string
		before, after histogram
		wantMs        float64 // NaN: none
		wantObs       float64
	}{
		{"the phase alone: 100 observations, 2 in (2, 4] ms", before, after, 3, 100},
		// 1050 of 1100 ≤ 1 ms, rank 1089: 39 of the 48 in (1, 2] ms.
		{"no first reading: everything since the start", nil, after, 1 + 39.0/48, 1100},
		{"nothing observed in the phase", after, after, math.NaN(), 0},
		{"never read", nil, nil, math.NaN(), 0},
		{"a counter reset (the server restarted)", after, before, math.NaN(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := quantileMs(tc.before, tc.after, 0.99)
			if math.IsNaN(tc.wantMs) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.wantMs) > 1e-9) {
				t.Errorf("p99 = %v ms, want %v", got, tc.wantMs)
			}
			if got := observations(tc.before, tc.after); got != tc.wantObs {
				t.Errorf("observations = %v, want %v", got, tc.wantObs)
			}
		})
	}
}

// An excerpt of etcd 3.7's /metrics, with what a parser must not trip on added: a
// histogram family without series, one with two label sets (summed), a label value with a
// comma and an escaped quote, a counter, and a timestamp.
const etcdMetrics = `# HELP etcd_disk_backend_commit_duration_seconds The latency distributions of commit called by backend.
# TYPE etcd_disk_backend_commit_duration_seconds histogram
etcd_disk_backend_commit_duration_seconds_bucket{le="0.001"} 7
etcd_disk_backend_commit_duration_seconds_bucket{le="0.002"} 9
etcd_disk_backend_commit_duration_seconds_bucket{le="0.004"} 10
etcd_disk_backend_commit_duration_seconds_bucket{le="8.192"} 10
etcd_disk_backend_commit_duration_seconds_bucket{le="+Inf"} 10
etcd_disk_backend_commit_duration_seconds_sum 0.0137
etcd_disk_backend_commit_duration_seconds_count 10
# HELP etcd_disk_backend_snapshot_duration_seconds The latency distribution of backend snapshots.
# TYPE etcd_disk_backend_snapshot_duration_seconds histogram
# HELP etcd_disk_wal_fsync_duration_seconds The latency distributions of fsync called by WAL.
# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 8
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 9
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 9 1733140000000
etcd_disk_wal_fsync_duration_seconds_sum 0.0048
etcd_disk_wal_fsync_duration_seconds_count 9
# HELP etcd_disk_wal_write_bytes_total Total number of bytes written in WAL.
# TYPE etcd_disk_wal_write_bytes_total gauge
etcd_disk_wal_write_bytes_total 4096
# TYPE two_sets_seconds histogram
two_sets_seconds_bucket{path="/a,b",note="say \"hi\"",le="0.001"} 1
two_sets_seconds_bucket{path="/a,b",note="say \"hi\"",le="+Inf"} 2
two_sets_seconds_sum{path="/a,b",note="say \"hi\""} 0.01
two_sets_seconds_count{path="/a,b",note="say \"hi\""} 2
two_sets_seconds_bucket{path="/c",note="",le="0.001"} 3
two_sets_seconds_bucket{path="/c",note="",le="+Inf"} 3
two_sets_seconds_sum{path="/c",note=""} 0.002
two_sets_seconds_count{path="/c",note=""} 3
`

func TestParseHistograms(t *testing.T) {
	got, err := parseHistograms(strings.NewReader(etcdMetrics), etcdWALFsync, etcdBackendCommit,
		"etcd_disk_backend_snapshot_duration_seconds", "etcd_disk_wal_write_bytes_total", "two_sets_seconds", "absent_seconds")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]histogram{
		etcdWALFsync:       {0.001: 8, 0.002: 9, inf: 9},
		etcdBackendCommit:  {0.001: 7, 0.002: 9, 0.004: 10, 8.192: 10, inf: 10},
		"two_sets_seconds": {0.001: 4, inf: 5},
		// Left out: the family without series (expfmt drops it), the gauge, the absent family.
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseHistograms =\n%v\nwant\n%v", got, want)
	}
	if _, err := parseHistograms(strings.NewReader("# TYPE x histogram\nx_bucket{le=\"0.1\"} not-a-number\n"), "x"); err == nil {
		t.Error("malformed text parsed without an error")
	}
}

// etcdScrape is a reading of the store etcd: fsyncs by bucket (1, 2, 4 ms, +Inf) and backend
// commits likewise.
func etcdScrape(fsync, commit [4]float64) map[string]histogram {
	h := func(c [4]float64) histogram { return histogram{0.001: c[0], 0.002: c[1], 0.004: c[2], inf: c[3]} }
	return map[string]histogram{etcdWALFsync: h(fsync), etcdBackendCommit: h(commit)}
}

func TestReadStoreCommit(t *testing.T) {
	res := &Results{Systems: []SystemResult{
		{Name: SystemRegistrar, Deregistration: LagStats{P99: 40}},
		{Name: SystemAPIWatch, Deregistration: LagStats{P99: 30}},
	}}
	before := etcdScrape([4]float64{100, 100, 100, 100}, [4]float64{10, 10, 10, 10})
	// 100 fsyncs: 50 ≤ 1 ms, 48 in (1, 2], 2 in (2, 4] ms: p99 3 ms. 10 backend commits, all in
	// (2, 4] ms: p99 2 + 2 × 9.9/10 = 3.98 ms.
	after := etcdScrape([4]float64{150, 198, 200, 200}, [4]float64{10, 10, 20, 20})
	sc := storeCommitOf(before, after, res)
	want := &StoreCommit{WALFsyncs: 100, BackendCommits: 10, WALFsyncP99Ms: ptr.To(3.0), BackendCommitP99Ms: ptr.To(3.98),
		P99Ms: ptr.To(6.98), RegistrarPartMs: ptr.To(40 - 30 - 6.98)}
	if !storeCommitNear(sc, want) {
		t.Errorf("storeCommitOf = %s, want %s", jsonOf(sc), jsonOf(want))
	}

	// No backend commit in the phase: no sum, no part; the fsyncs are still reported.
	sc = storeCommitOf(before, etcdScrape([4]float64{150, 198, 200, 200}, [4]float64{10, 10, 10, 10}), res)
	if sc == nil || sc.WALFsyncs != 100 || sc.BackendCommits != 0 || sc.BackendCommitP99Ms != nil || sc.P99Ms != nil || sc.RegistrarPartMs != nil {
		t.Errorf("without backend commits: %s", jsonOf(sc))
	}
	// A scrape that failed: nothing (a difference from nothing would count the setup).
	if sc := storeCommitOf(nil, after, res); sc != nil {
		t.Errorf("without the first scrape: %s, want nil", jsonOf(sc))
	}
	if sc := storeCommitOf(before, nil, res); sc != nil {
		t.Errorf("without the second scrape: %s, want nil", jsonOf(sc))
	}
	// Without a floor to subtract: the store's figures, no part.
	sc = storeCommitOf(before, after, &Results{Systems: res.Systems[:1]})
	if sc == nil || sc.P99Ms == nil || sc.RegistrarPartMs != nil {
		t.Errorf("without the API watch floor: %s", jsonOf(sc))
	}
	// The JSON names of the run file.
	var fields map[string]any
	if err := json.Unmarshal([]byte(jsonOf(storeCommitOf(before, after, res))), &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"walFsyncs", "backendCommits", "walFsyncP99Ms", "backendCommitP99Ms", "p99Ms", "registrarPartMs"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON lacks %q: %v", k, fields)
		}
	}
}

func storeCommitNear(a, b *StoreCommit) bool {
	if a == nil || b == nil {
		return a == b
	}
	near := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || math.Abs(*x-*y) < 1e-9) }
	return a.WALFsyncs == b.WALFsyncs && a.BackendCommits == b.BackendCommits && near(a.WALFsyncP99Ms, b.WALFsyncP99Ms) &&
		near(a.BackendCommitP99Ms, b.BackendCommitP99Ms) && near(a.P99Ms, b.P99Ms) && near(a.RegistrarPartMs, b.RegistrarPartMs)
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func withStoreCommit(r *Results, fsync, commit float64) *Results {
	reg, _ := r.System(SystemRegistrar)
	floor, _ := r.System(SystemAPIWatch)
	part := reg.Deregistration.P99 - floor.Deregistration.P99 - fsync - commit
	r.StoreCommit = &StoreCommit{WALFsyncs: 1000, BackendCommits: 200, WALFsyncP99Ms: ptr.To(fsync), BackendCommitP99Ms: ptr.To(commit),
		P99Ms: ptr.To(fsync + commit), RegistrarPartMs: &part}
	return r
}

func TestPublishSweepStoreCommit(t *testing.T) {
	runs := []*Results{
		// 1,000 pods: registrar − floor 5 and 7 ms, store commit 3 and 4 ms: parts 2 and 3 ms.
		withStoreCommit(sweepRun(1000, 8, 12, 60, 80, 20, 15), 1, 2),
		withStoreCommit(sweepRun(1000, 9, 12, 61, 80, 22, 15), 1.5, 2.5),
		// 5,000 pods: 12 − 4 = 8 ms, missed.
		withStoreCommit(sweepRun(5000, 40, 60, 90, 150, 37, 25), 2, 2),
		// 20,000 pods: a run before the figure existed; the table has no row for it.
		sweepRun(20000, 200, 240, 300, 400, 50, 30),
	}
	p := PublishSweep(KindSweep, "bench-sweep", "make bench-sweep", "abc", runs)
	ids := []string{}
	for _, tb := range p.Tables {
		ids = append(ids, tb.ID)
	}
	if want := []string{"bench-sweep", "bench-sweep-targets", "bench-sweep-tails", "bench-sweep-store-commit"}; !slicesEqual(ids, want) {
		t.Fatalf("tables %q, want %q", ids, want)
	}
	sc := p.Tables[3]
	if len(sc.Rows) != 2 {
		t.Fatalf("store-commit rows %q, want 1,000 and 5,000 pods", sc.Rows)
	}
	if got, want := sc.Rows[0], []string{"1000 / 100", "21 (20–22)", "15", "+6 (+5–+7)", "1.2 (1.0–1.5)", "2.2 (2.0–2.5)", "3.5 (3.0–4.0)",
		"+2.5 (+2.0–+3.0)", "1000 / 200"}; !slicesEqual(got, want) {
		t.Errorf("1,000-pod row %q, want %q", got, want)
	}
	for _, row := range sc.Rows {
		if len(row) != len(sc.Columns) {
			t.Errorf("row %v has %d cells for %d columns", row, len(row), len(sc.Columns))
		}
	}
	targets := p.Tables[1]
	if !strings.Contains(targets.Title, "issues 16 and 39") {
		t.Errorf("targets title %q does not name issue 39", targets.Title)
	}
	parts := map[string][]string{}
	for _, r := range targets.Rows {
		if strings.HasPrefix(r[0], "registrar's part") {
			parts[r[1]] = r[2:]
		}
	}
	if want := []string{"+2.5 ms (registrar − floor +6 ms, store commit p99 3.5 ms)", "met"}; !slicesEqual(parts["1000"], want) {
		t.Errorf("1,000-pod part target %q, want %q", parts["1000"], want)
	}
	if got := parts["5000"]; len(got) != 2 || got[1] != "missed" {
		t.Errorf("5,000-pod part target %q, want missed", got)
	}
	if _, ok := parts["20000"]; ok || len(parts) != 2 {
		t.Errorf("part targets %v, want 1,000 and 5,000 pods only (20,000 has no store commit)", parts)
	}
}

// A sweep published before the store commit was read republishes exactly as it was: no new
// table, the targets of issue 16 only, every column unchanged. (If the sweep's tables change
// on purpose, republish the file: go run ./bench/controlplane/cmd -republish <file>.)
func TestPublishSweepOlderRunsUnchanged(t *testing.T) {
	const path = "../../docs/bench/bench-sweep-recheck.json"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("no committed sweep to compare with: %v", err)
	}
	var old Publication
	if err := json.Unmarshal(data, &old); err != nil {
		t.Fatal(err)
	}
	for _, r := range old.Runs {
		if r.StoreCommit != nil {
			t.Skipf("%s has store-commit figures: not a file from before them", path)
		}
	}
	p := PublishSweep(old.Kind, old.Tables[0].ID, old.Command, old.Commit, old.Runs)
	if !reflect.DeepEqual(p.Tables, old.Tables) {
		t.Errorf("republishing %s changes its tables:\ngot  %s\nwant %s", path, jsonOf(p.Tables), jsonOf(old.Tables))
	}
}
