package ctl

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/registrar-dev/registrar/internal/ctl/lagstats"
)

// lag reads the operator's metrics endpoint and prints the detection-lag percentiles.
func (r *runner) lag(ctx context.Context) int {
	families, code := r.scrape(ctx)
	if code != ExitOK {
		return code
	}
	stats := lagstats.Summarise(families)
	if len(stats) == 0 {
		return r.fail(ExitNotFound, "no registrar lag histograms at %s: is it the operator's --metrics-bind-address?", r.opts.metricsURL)
	}
	ok, err := r.writeData(stats)
	if !ok {
		err = lagstats.Table(r.env.Stdout, stats)
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
