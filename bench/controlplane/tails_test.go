package controlplane

import (
	"math"
	"strings"
	"testing"

	"github.com/registrar-dev/registrar/test/support/metrics"
)

func parse(t *testing.T, text string) metrics.Samples {
	t.Helper()
	s, err := metrics.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestQuantileMs(t *testing.T) {
	before := parse(t, `
op_seconds_bucket{operation="apply",le="0.001"} 10
op_seconds_bucket{operation="apply",le="0.002"} 10
op_seconds_bucket{operation="apply",le="0.004"} 10
op_seconds_bucket{operation="apply",le="+Inf"} 10
op_seconds_bucket{operation="list",le="0.001"} 0
op_seconds_bucket{operation="list",le="0.002"} 0
op_seconds_bucket{operation="list",le="0.004"} 500
op_seconds_bucket{operation="list",le="+Inf"} 500
`)
	// 100 more applies: 50 under 1 ms, 48 in (1, 2] ms, 2 in (2, 4] ms.
	after := parse(t, `
op_seconds_bucket{operation="apply",le="0.001"} 60
op_seconds_bucket{operation="apply",le="0.002"} 108
op_seconds_bucket{operation="apply",le="0.004"} 110
op_seconds_bucket{operation="apply",le="+Inf"} 110
op_seconds_bucket{operation="list",le="0.001"} 0
op_seconds_bucket{operation="list",le="0.002"} 0
op_seconds_bucket{operation="list",le="0.004"} 900
op_seconds_bucket{operation="list",le="+Inf"} 900
`)
	q := func(qq float64, filters ...string) float64 {
		return quantileMs(histogramOf(before, "op_seconds", filters...), histogramOf(after, "op_seconds", filters...), qq)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if got := q(0.5, `operation="apply"`); !near(got, 1) {
		t.Errorf("p50 = %v ms, want 1 (the 50th of 100 is the last under 1 ms)", got)
	}
	if got := q(0.99, `operation="apply"`); !near(got, 3) {
		t.Errorf("p99 = %v ms, want 3 (halfway into the (2, 4] ms bucket)", got)
	}
	if got := q(0.99); !(got > 2 && got <= 4) {
		t.Errorf("p99 over both operations = %v ms, want inside (2, 4]", got)
	}
	if got := q(0.99, `operation="watch"`); !math.IsNaN(got) {
		t.Errorf("p99 of nothing = %v, want NaN", got)
	}
	overflow := parse(t, `
op_seconds_bucket{operation="apply",le="0.001"} 10
op_seconds_bucket{operation="apply",le="0.002"} 10
op_seconds_bucket{operation="apply",le="0.004"} 10
op_seconds_bucket{operation="apply",le="+Inf"} 20
`)
	if got := quantileMs(histogramOf(before, "op_seconds", `operation="apply"`), histogramOf(overflow, "op_seconds", `operation="apply"`), 0.99); !near(got, 4) {
		t.Errorf("p99 in the +Inf bucket = %v ms, want the largest finite bound, 4", got)
	}
}

func TestTailsOmitWhatWasNotRead(t *testing.T) {
	op := parse(t, `workqueue_queue_duration_seconds_bucket{controller="serviceregistry",name="serviceregistry",le="0.001"} 5
workqueue_queue_duration_seconds_bucket{controller="serviceregistry",name="serviceregistry",le="+Inf"} 5
`)
	tails := tailsBetween(scrapes{}, scrapes{operator: op})
	if tails.QueueWaitP99Ms == nil || *tails.QueueWaitP99Ms > 1 {
		t.Errorf("queue wait p99 = %v, want ≤ 1 ms", tails.QueueWaitP99Ms)
	}
	if tails.StoreFsyncP99Ms != nil || tails.KubeEtcdFsyncP99Ms != nil || tails.StoreApplyP99Ms != nil {
		t.Errorf("histograms never scraped have p99s: %+v", tails)
	}
	// An etcd read after the phase but not before: its difference would count the setup too.
	etcd := etcdScrape([4]float64{1, 2, 3, 3}, [4]float64{1, 1, 1, 1})
	tails = tailsBetween(scrapes{operator: op}, scrapes{operator: op, store: etcd, kubeEtcd: etcd})
	if tails.StoreFsyncP99Ms != nil || tails.StoreBackendCommitP99Ms != nil || tails.KubeEtcdFsyncP99Ms != nil {
		t.Errorf("etcd read once has p99s: %+v", tails)
	}
	tails = tailsBetween(scrapes{operator: op, store: map[string]histogram{}}, scrapes{operator: op, store: etcd})
	if tails.StoreFsyncP99Ms == nil || *tails.StoreFsyncP99Ms <= 2 || *tails.StoreFsyncP99Ms > 4 || tails.KubeEtcdFsyncP99Ms != nil {
		t.Errorf("store etcd read twice: fsync p99 %v, want in (2, 4] ms; %+v", tails.StoreFsyncP99Ms, tails)
	}
}
