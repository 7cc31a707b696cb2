package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// OperatorStats are the operator's own counters over the measured phase, from its /metrics:
// where a pod event's time goes inside registrar, and how many API writes it makes.
type OperatorStats struct {
	Reconciles int `json:"reconciles"`
	// QueueWaitMs is the mean time a registry waited in the work queue; ReconcileMs the mean
	// reconcile (store write, status patch).
	QueueWaitMs float64 `json:"queueWaitMeanMs"`
	ReconcileMs float64 `json:"reconcileMeanMs"`
	// APIWrites are the operator's POST, PUT, PATCH and DELETE requests (status, Events).
	APIWrites     int `json:"apiWrites"`
	StatusPatches int `json:"patches"`
	Posts         int `json:"posts"`
}

// metricSample is one series of the Prometheus text format: name{labels} value.
type metricSample struct {
	name, labels string
	value        float64
}

func parseMetrics(r io.Reader) []metricSample {
	var out []metricSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:i], "{")
		out = append(out, metricSample{name: name, labels: labels, value: v})
	}
	return out
}

// metricSums adds up the samples of each name whose labels contain every filter.
type metricSums map[string]float64

func sumMetrics(samples []metricSample) metricSums {
	sums := metricSums{}
	for _, s := range samples {
		switch {
		case strings.HasPrefix(s.name, "workqueue_") && strings.Contains(s.labels, `controller="serviceregistry"`):
			sums[s.name] += s.value
		case s.name == "rest_client_requests_total":
			for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
				if strings.Contains(s.labels, `method="`+m+`"`) {
					sums["api_"+m] += s.value
				}
			}
		}
	}
	return sums
}

// operatorStats is what happened between two scrapes.
func operatorStats(before, after metricSums) OperatorStats {
	d := func(k string) float64 { return after[k] - before[k] }
	st := OperatorStats{
		Reconciles:    int(d("workqueue_work_duration_seconds_count")),
		StatusPatches: int(d("api_PATCH")),
		Posts:         int(d("api_POST")),
	}
	st.APIWrites = int(d("api_POST") + d("api_PUT") + d("api_PATCH") + d("api_DELETE"))
	if n := d("workqueue_queue_duration_seconds_count"); n > 0 {
		st.QueueWaitMs = d("workqueue_queue_duration_seconds_sum") / n * 1000
	}
	if n := d("workqueue_work_duration_seconds_count"); n > 0 {
		st.ReconcileMs = d("workqueue_work_duration_seconds_sum") / n * 1000
	}
	return st
}

// scrape reads the operator's /metrics.
func scrape(ctx context.Context, addr string) (metricSums, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape operator metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape operator metrics: %s", resp.Status)
	}
	return sumMetrics(parseMetrics(resp.Body)), nil
}
