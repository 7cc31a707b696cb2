package eureka

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the registrar_eureka_* metrics of a server.
type Metrics struct {
	Requests     *prometheus.CounterVec   // endpoint, code
	Duration     *prometheus.HistogramVec // endpoint
	Fetches      *prometheus.CounterVec   // kind: full | delta
	Cache        *prometheus.CounterVec   // result: hit | miss
	Rejected     *prometheus.CounterVec   // reason: inflight | uri_too_long | body_too_large | write_refused
	Inflight     prometheus.Gauge
	Instances    prometheus.Gauge
	Applications prometheus.Gauge
	Version      prometheus.Gauge
	DeltaSize    prometheus.Gauge
	Connected    prometheus.Gauge
	Ready        prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg (when not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "registrar_eureka_requests_total",
			Help: "Requests to the Eureka API by endpoint and HTTP status code."}, []string{"endpoint", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "registrar_eureka_request_duration_seconds",
			Help:    "Time to answer a request to the Eureka API, by endpoint.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"endpoint"}),
		Fetches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "registrar_eureka_fetches_total",
			Help: "Successful registry fetches: kind=full (/apps) or delta (/apps/delta)."}, []string{"kind"}),
		Cache: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "registrar_eureka_cache_total",
			Help: "Encoded-response cache lookups: result=hit or miss (a miss encodes the body once for the registry's version)."}, []string{"result"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "registrar_eureka_rejected_total",
			Help: "Requests refused before routing or because they write: reason=inflight, uri_too_long, body_too_large, write_refused."}, []string{"reason"}),
		Inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "registrar_eureka_inflight_requests",
			Help: "Requests to the Eureka API being answered."}),
		Instances: prometheus.NewGauge(prometheus.GaugeOpts{Name: "registrar_eureka_instances",
			Help: "Instances in the served registry."}),
		Applications: prometheus.NewGauge(prometheus.GaugeOpts{Name: "registrar_eureka_applications",
			Help: "Applications in the served registry."}),
		Version: prometheus.NewGauge(prometheus.GaugeOpts{Name: "registrar_eureka_registry_version",
			Help: "The served registry's version (versions__delta)."}),
		DeltaSize: prometheus.NewGauge(prometheus.GaugeOpts{Name: "registrar_eureka_delta_instances",
			Help: "Instances in the delta window (/apps/delta)."}),
		Connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "registrar_eureka_store_connected",
			Help: "1 while the watch of the store is alive; 0 while the last known registry is served from memory."}),
		Ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "registrar_eureka_ready",
			Help: "1 once the first listing of the store is loaded."}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.Duration, m.Fetches, m.Cache, m.Rejected, m.Inflight, m.Instances,
			m.Applications, m.Version, m.DeltaSize, m.Connected, m.Ready)
	}
	return m
}

// observeView sets the registry gauges from v.
func (m *Metrics) observeView(v *View) {
	m.Instances.Set(float64(v.Instances))
	m.Applications.Set(float64(len(v.Apps)))
	m.Version.Set(float64(v.Version))
	n := 0
	for _, app := range v.Delta {
		n += len(app.Instances)
	}
	m.DeltaSize.Set(float64(n))
}
