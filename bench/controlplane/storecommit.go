package controlplane

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The deregistration floor stated as physics (issue 39 §4): of registrar's deregistration p99
// beyond the API watch floor, how much is the store's own commit (its etcd's WAL fsync and
// backend commit) and how much is left to registrar.

// TargetRegistrarPartMs: issue 39 §4's target for registrar's part of the deregistration
// p99, what is left of it after the API watch floor and the store's commit.
const TargetRegistrarPartMs = 5.0

// The store etcd's histograms of its own commit, in seconds.
const (
	etcdWALFsync      = "etcd_disk_wal_fsync_duration_seconds"
	etcdBackendCommit = "etcd_disk_backend_commit_duration_seconds"
)

// StoreCommit is the store etcd's own commit over the measured phase, from the difference of
// two scrapes of its /metrics, and what it leaves of registrar's deregistration p99. Omitted
// from a run whose store metrics could not be read (and from every run before 2026-12).
type StoreCommit struct {
	// WALFsyncs and BackendCommits are the observations of the measured phase
	// (etcd_disk_wal_fsync_duration_seconds, etcd_disk_backend_commit_duration_seconds): the
	// population each p99 is taken over.
	WALFsyncs      int64 `json:"walFsyncs"`
	BackendCommits int64 `json:"backendCommits"`
	// WALFsyncP99Ms and BackendCommitP99Ms are their p99s, interpolated inside a bucket as
	// Prometheus' histogram_quantile does; omitted without observations.
	WALFsyncP99Ms      *float64 `json:"walFsyncP99Ms,omitempty"`
	BackendCommitP99Ms *float64 `json:"backendCommitP99Ms,omitempty"`
	// P99Ms is the store commit p99 as issue 39 §4 defines it: WAL fsync p99 + backend commit
	// p99. A sum of p99s, not the p99 of a sum (which no scrape can give).
	P99Ms *float64 `json:"p99Ms,omitempty"`
	// RegistrarPartMs is registrar's deregistration p99 − the API watch floor's p99 − P99Ms.
	RegistrarPartMs *float64 `json:"registrarPartMs,omitempty"`
}

// storeCommitOf reads the store's commit between two scrapes of its etcd (nil when the store's
// /metrics could not be read) and, from the run's deregistration p99s, registrar's part.
func storeCommitOf(before, after map[string]histogram, res *Results) *StoreCommit {
	if before, after = bothRead(before, after); after == nil {
		return nil
	}
	p99 := func(name string) *float64 {
		v := quantileMs(before[name], after[name], 0.99)
		if math.IsNaN(v) {
			return nil // JSON has no NaN
		}
		return &v
	}
	sc := &StoreCommit{
		WALFsyncs:          int64(observations(before[etcdWALFsync], after[etcdWALFsync])),
		BackendCommits:     int64(observations(before[etcdBackendCommit], after[etcdBackendCommit])),
		WALFsyncP99Ms:      p99(etcdWALFsync),
		BackendCommitP99Ms: p99(etcdBackendCommit),
	}
	if sc.WALFsyncP99Ms == nil || sc.BackendCommitP99Ms == nil {
		return sc
	}
	sum := *sc.WALFsyncP99Ms + *sc.BackendCommitP99Ms
	sc.P99Ms = &sum
	reg, ok1 := res.System(SystemRegistrar)
	floor, ok2 := res.System(SystemAPIWatch)
	if ok1 && ok2 && reg.Deregistration.P99 > 0 && floor.Deregistration.P99 > 0 {
		part := reg.Deregistration.P99 - floor.Deregistration.P99 - sum
		sc.RegistrarPartMs = &part
	}
	return sc
}

// bucket is one cumulative bucket: the observations ≤ upper.
type bucket struct{ upper, count float64 }

// deltaBuckets are the cumulative buckets of what after observed beyond before (two readings
// of one histogram; a bucket before lacks counts from zero), sorted by upper bound.
func deltaBuckets(before, after histogram) []bucket {
	out := make([]bucket, 0, len(after))
	for upper, count := range after {
		out = append(out, bucket{upper, count - before[upper]})
	}
	slices.SortFunc(out, func(a, b bucket) int { return cmp.Compare(a.upper, b.upper) })
	return out
}

// observations is how many observations after has beyond before (its +Inf bucket's
// difference; 0 without one).
func observations(before, after histogram) float64 {
	inf := math.Inf(1)
	if _, ok := after[inf]; !ok {
		return 0
	}
	return max(after[inf]-before[inf], 0)
}

// bucketQuantile is the q-quantile of cumulative buckets sorted by upper bound, as PromQL's
// histogram_quantile computes it (promql/quantile.go, bucketQuantile): NaN without a +Inf
// bucket, with fewer than two buckets or without observations; linear interpolation inside
// the bucket the rank falls in, from 0 for the lowest bucket (unless its bound is ≤ 0, then
// that bound); a rank in the +Inf bucket gives the largest finite bound. Counts that
// decrease from one bucket to the next are raised to the previous count, as PromQL does.
func bucketQuantile(q float64, buckets []bucket) float64 {
	switch {
	case math.IsNaN(q):
		return math.NaN()
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(1)
	}
	n := len(buckets)
	if n < 2 || !math.IsInf(buckets[n-1].upper, 1) {
		return math.NaN()
	}
	counts := make([]float64, n)
	for i, b := range buckets {
		counts[i] = b.count
		if i > 0 && counts[i] < counts[i-1] {
			counts[i] = counts[i-1]
		}
	}
	total := counts[n-1]
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(n-1, func(i int) bool { return counts[i] >= rank })
	if i == n-1 {
		return buckets[n-2].upper
	}
	if i == 0 && buckets[0].upper <= 0 {
		return buckets[0].upper
	}
	start, end, count := 0.0, buckets[i].upper, counts[i]
	if i > 0 {
		start = buckets[i-1].upper
		count -= counts[i-1]
		rank -= counts[i-1]
	}
	return start + (end-start)*(rank/count)
}

// parseHistograms reads the histogram families names from the text exposition format (with
// expfmt, the parser Prometheus uses), each summed over its label sets into one histogram of
// cumulative counts by upper bound; a family the text lacks, or that is not a histogram, is
// left out.
func parseHistograms(r io.Reader, names ...string) (map[string]histogram, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := map[string]histogram{}
	for _, name := range names {
		fam, ok := families[name]
		if !ok || fam.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		h := histogram{}
		for _, m := range fam.GetMetric() {
			hist := m.GetHistogram()
			count := float64(hist.GetSampleCount())
			if hist.SampleCountFloat != nil {
				count = hist.GetSampleCountFloat()
			}
			hasInf := false
			for _, b := range hist.GetBucket() {
				c := float64(b.GetCumulativeCount())
				if b.CumulativeCountFloat != nil {
					c = b.GetCumulativeCountFloat()
				}
				h[b.GetUpperBound()] += c
				hasInf = hasInf || math.IsInf(b.GetUpperBound(), 1)
			}
			if !hasInf { // the +Inf bucket is the count, exposed or not
				h[math.Inf(1)] += count
			}
		}
		out[name] = h
	}
	return out, nil
}

// scrapeHistograms reads http://addr/metrics (bounded by ctx and 30 s) and returns the
// histogram families names, with the text it read.
func scrapeHistograms(ctx context.Context, addr string, names ...string) (map[string]histogram, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	text, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	h, err := parseHistograms(bytes.NewReader(text), names...)
	if err != nil {
		return nil, text, fmt.Errorf("scrape %s: %w", addr, err)
	}
	return h, text, nil
}
