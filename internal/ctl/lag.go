package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"text/tabwriter"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// lagMetrics are the operator's histograms that lag reads, in print order.
var lagMetrics = []struct{ name, metric string }{
	{"deregistration", "registrar_deregistration_lag_seconds"},
	{"registration", "registrar_registration_lag_seconds"},
}

// lagStats summarises one histogram; quantiles are estimated from the buckets by linear
// interpolation, as PromQL's histogram_quantile does.
type lagStats struct {
	Name   string   `json:"name"`
	Metric string   `json:"metric"`
	Count  uint64   `json:"count"`
	Mean   *float64 `json:"meanSeconds"`
	P50    *float64 `json:"p50Seconds"`
	P90    *float64 `json:"p90Seconds"`
	P99    *float64 `json:"p99Seconds"`
	Max    *float64 `json:"maxBucketSeconds"` // upper bound of the highest non-empty bucket
}

// lag reads the operator's metrics endpoint and prints the detection-lag percentiles.
func (r *runner) lag(ctx context.Context) int {
	families, code := r.scrape(ctx)
	if code != ExitOK {
		return code
	}
	var stats []lagStats
	for _, m := range lagMetrics {
		fam := families[m.metric]
		if fam == nil || fam.GetType() != dto.MetricType_HISTOGRAM || len(fam.GetMetric()) == 0 {
			continue
		}
		stats = append(stats, summarise(m.name, m.metric, mergeHistograms(fam)))
	}
	if len(stats) == 0 {
		return r.fail(ExitNotFound, "no registrar lag histograms at %s: is it the operator's --metrics-bind-address?", r.opts.metricsURL)
	}
	ok, err := r.writeData(stats)
	if !ok {
		err = r.lagTable(stats)
	}
	if err != nil {
		return r.fail(ExitError, "%v", err)
	}
	return ExitOK
}

func (r *runner) scrape(ctx context.Context) (map[string]*dto.MetricFamily, int) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.opts.metricsURL, nil)
	if err != nil {
		return nil, r.fail(ExitUsage, "--metrics-url %q: %v", r.opts.metricsURL, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var netErr net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) {
			return nil, r.fail(ExitUnreachable, "metrics endpoint unreachable: %v", err)
		}
		return nil, r.fail(ExitError, "scrape %s: %v", r.opts.metricsURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, r.fail(ExitError, "scrape %s: %s", r.opts.metricsURL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, r.fail(ExitError, "parse metrics from %s: %v", r.opts.metricsURL, err)
	}
	return families, ExitOK
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

func summarise(name, metric string, h histogram) lagStats {
	s := lagStats{Name: name, Metric: metric, Count: h.count}
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

func (r *runner) lagTable(stats []lagStats) error {
	tw := tabwriter.NewWriter(r.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAG\tCOUNT\tP50\tP90\tP99\tMEAN\tMAX BUCKET")
	for _, s := range stats {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Count, secs(s.P50), secs(s.P90), secs(s.P99), secs(s.Mean), secs(s.Max))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(r.env.Stdout, "(quantiles interpolated within histogram buckets; Kubernetes records pod changes at 1 s resolution)")
	return err
}

// secs formats seconds with a unit that fits.
func secs(v *float64) string {
	if v == nil {
		return "-"
	}
	switch {
	case *v < 1:
		return strconv.FormatFloat(*v*1000, 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(*v, 'f', 2, 64) + "s"
	}
}
