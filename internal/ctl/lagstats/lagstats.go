// Package lagstats is what registrarctl lag makes of the operator's metrics: the
// registration and deregistration lag histograms (Metrics) summed over their series and
// summarised as a count, a mean and p50/p90/p99 estimated within the buckets as PromQL's
// histogram_quantile does (Summarise), and their table. internal/ctl scrapes the endpoint
// and maps what goes wrong to exit codes.
package lagstats

import (
	"fmt"
	"io"
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"

	"github.com/registrar-dev/registrar/internal/ctl/output"
)

// Metrics are the operator's histograms that lag reads, in print order.
var Metrics = []struct{ name, metric string }{
	{"deregistration", "registrar_deregistration_lag_seconds"},
	{"registration", "registrar_registration_lag_seconds"},
}

// Stats summarises one histogram; quantiles are estimated from the buckets by linear
// interpolation, as PromQL's histogram_quantile does.
type Stats struct {
	Name   string   `json:"name"`
	Metric string   `json:"metric"`
	Count  uint64   `json:"count"`
	Mean   *float64 `json:"meanSeconds"`
	P50    *float64 `json:"p50Seconds"`
	P90    *float64 `json:"p90Seconds"`
	P99    *float64 `json:"p99Seconds"`
	Max    *float64 `json:"maxBucketSeconds"` // upper bound of the highest non-empty bucket
}

// Summarise summarises each of Metrics found among families (a histogram with series),
// in Metrics' order.
func Summarise(families map[string]*dto.MetricFamily) []Stats {
	var stats []Stats
	for _, m := range Metrics {
		fam := families[m.metric]
		if fam == nil || fam.GetType() != dto.MetricType_HISTOGRAM || len(fam.GetMetric()) == 0 {
			continue
		}
		stats = append(stats, summarise(m.name, m.metric, mergeHistograms(fam)))
	}
	return stats
}

// bucket is a cumulative histogram bucket.
type bucket struct {
	upper float64
	count uint64
}

type histogram struct {
	count   uint64
	sum     float64
	buckets []bucket
}

// mergeHistograms adds the series of a family (one per label set) into one histogram.
func mergeHistograms(fam *dto.MetricFamily) histogram {
	var h histogram
	byUpper := map[float64]uint64{}
	for _, m := range fam.GetMetric() {
		hist := m.GetHistogram()
		h.count += hist.GetSampleCount()
		h.sum += hist.GetSampleSum()
		for _, b := range hist.GetBucket() {
			byUpper[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	for upper, count := range byUpper {
		h.buckets = append(h.buckets, bucket{upper, count})
	}
	sort.Slice(h.buckets, func(i, j int) bool { return h.buckets[i].upper < h.buckets[j].upper })
	if n := len(h.buckets); n == 0 || !math.IsInf(h.buckets[n-1].upper, 1) {
		h.buckets = append(h.buckets, bucket{math.Inf(1), h.count})
	}
	return h
}

func summarise(name, metric string, h histogram) Stats {
	s := Stats{Name: name, Metric: metric, Count: h.count}
	if h.count == 0 {
		return s
	}
	mean := h.sum / float64(h.count)
	s.Mean = &mean
	s.P50, s.P90, s.P99 = quantile(0.5, h), quantile(0.9, h), quantile(0.99, h)
	for i := len(h.buckets) - 1; i >= 0; i-- {
		prev := uint64(0)
		if i > 0 {
			prev = h.buckets[i-1].count
		}
		if h.buckets[i].count > prev {
			upper := h.buckets[i].upper
			if math.IsInf(upper, 1) && i > 0 {
				upper = h.buckets[i-1].upper // only a lower bound is known
			}
			s.Max = &upper
			break
		}
	}
	return s
}

// quantile estimates the q-quantile like histogram_quantile: linear within the bucket that
// holds it; in the +Inf bucket it returns the highest finite bound.
func quantile(q float64, h histogram) *float64 {
	rank := q * float64(h.count)
	lower, prevCount := 0.0, uint64(0)
	for i, b := range h.buckets {
		if float64(b.count) >= rank {
			if math.IsInf(b.upper, 1) {
				v := lower
				if i == 0 {
					v = 0
				}
				return &v
			}
			v := lower
			if inBucket := b.count - prevCount; inBucket > 0 {
				v = lower + (b.upper-lower)*(rank-float64(prevCount))/float64(inBucket)
			}
			return &v
		}
		lower, prevCount = b.upper, b.count
	}
	return nil
}

// Table prints the stats as a table, with a note on how the quantiles are estimated.
func Table(w io.Writer, stats []Stats) error {
	tw := output.NewTable(w)
	fmt.Fprintln(tw, "LAG\tCOUNT\tP50\tP90\tP99\tMEAN\tMAX BUCKET")
	for _, s := range stats {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Count, output.Seconds(s.P50), output.Seconds(s.P90), output.Seconds(s.P99), output.Seconds(s.Mean), output.Seconds(s.Max))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "(quantiles interpolated within histogram buckets; Kubernetes records pod changes at 1 s resolution)")
	return err
}
