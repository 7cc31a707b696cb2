package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/test/support/metrics"
)

// What the restart benchmark reads from a controller's /metrics (registrar's and
// kube-controller-manager's expose the same client-go families): its work queue, to tell when
// the initial list went through it; its API requests by method; whether it leads.

// Work queue families (client-go's workqueue metrics, as both controllers expose them).
const (
	queueAdds       = "workqueue_adds_total"
	queueDepth      = "workqueue_depth"
	queueUnfinished = "workqueue_unfinished_work_seconds"
	queueDone       = "workqueue_work_duration_seconds_count"
)

// The queues of the two controllers, as label filters of those families.
const (
	registrarQueue     = `controller="serviceregistry"`
	endpointSliceQueue = `name="endpoint_slice"`
)

// queueState is a controller's work queue in one scrape: items added (an item already queued
// is not added again), queued now (every priority), the seconds of work in flight, and items
// whose processing finished.
type queueState struct {
	Adds, Depth, Unfinished, Done float64
}

// queueOf sums the work queue families over the series whose labels contain filter.
func queueOf(samples metrics.Samples, filter string) queueState {
	var q queueState
	for _, s := range samples {
		if !strings.Contains(s.Labels, filter) {
			continue
		}
		switch s.Name {
		case queueAdds:
			q.Adds += s.Value
		case queueDepth:
			q.Depth += s.Value
		case queueUnfinished:
			q.Unfinished += s.Value
		case queueDone:
			q.Done += s.Value
		}
	}
	return q
}

// synced reports whether the initial list of want objects has gone through the queue of a
// controller that started empty: at least want items added and want processed, and nothing
// queued or in flight. The initial list adds every object once, so the queue cannot be empty
// and idle with one of them not yet processed.
func (q queueState) synced(want int) bool {
	return want > 0 && q.Adds >= float64(want) && q.Done >= float64(want) && q.Depth == 0 && q.Unfinished == 0
}

// requestsByMethod are the process's API requests by HTTP method (client-go's
// rest_client_requests_total; a LIST and a WATCH are GETs).
func requestsByMethod(samples metrics.Samples) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.Name != "rest_client_requests_total" {
			continue
		}
		m, ok := labelValue(s.Labels, "method")
		if !ok {
			m = "?"
		}
		out[m] += s.Value
	}
	return out
}

// countsBetween is after − before of each key, without the zeros; a key whose count went
// down is a counter that restarted (a new process): its count after is all of it.
func countsBetween(before, after map[string]float64) map[string]int {
	out := map[string]int{}
	for k, a := range after {
		d := a - before[k]
		if d < 0 {
			d = a
		}
		if d > 0 {
			out[k] = int(d + 0.5)
		}
	}
	return out
}

// total adds up counts.
func total(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// methodsCell is counts by method, largest first ("GET 12, PATCH 3").
func methodsCell(counts map[string]int) string {
	keys := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// leading reports whether the process says it holds its leader election lease
// (leader_election_master_status, controller-runtime's and client-go's gauge).
func leading(samples metrics.Samples) bool {
	for _, s := range samples {
		if s.Name == "leader_election_master_status" && s.Value == 1 {
			return true
		}
	}
	return false
}

// The store etcd's counters of what it applied (every key; only the operator writes the store
// in a restart run).
var storeEtcdCounters = []string{"etcd_mvcc_put_total", "etcd_mvcc_delete_total", "etcd_mvcc_txn_total", "etcd_mvcc_range_total"}

// countersOf are the named families' sums.
func countersOf(samples metrics.Samples, names []string) map[string]float64 {
	out := make(map[string]float64, len(names))
	for _, n := range names {
		out[n] = samples.Sum(n)
	}
	return out
}

// insecureClient reads a loopback HTTPS /metrics served with a self-signed certificate
// (kube-controller-manager's).
var insecureClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a loopback port of a process this harness started
}}

// scrapeHTTPS reads https://addr/metrics.
func scrapeHTTPS(ctx context.Context, addr string) (metrics.Samples, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := insecureClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	return metrics.Parse(resp.Body)
}
