package clients

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// labelType is the label of the xDS resource type.
const labelType = "type"

var (
	pushSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "registrar_xds_push_seconds",
		Help:    "Time from a resource change entering the xDS cache (the end of the reconcile that decided it) to each client's ACK of a response holding it, by type (lds, rds, cds, eds).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{labelType})
	nacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_xds_nacks_total",
		Help: "xDS responses rejected by a client (NACK, logged with the client's node id), by type.",
	}, []string{labelType})
	responses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_xds_responses_total",
		Help: "xDS responses sent to clients, by type.",
	}, []string{labelType})
	responseBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "registrar_xds_response_bytes",
		Help:    "Size of each xDS response sent, by type.",
		Buckets: prometheus.ExponentialBuckets(64, 4, 10),
	}, []string{labelType})
	clients = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "registrar_xds_clients",
		Help: "Open xDS (ADS) streams.",
	})
	streamsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "registrar_xds_streams_refused_total",
		Help: "xDS streams refused or closed for a limit: a stream beyond --xds-max-streams-per-peer open from one client IP address, or one subscribing to more names than the server accepts (docs/xds.md).",
	})
	rateLimited = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "registrar_xds_streams_rate_limited_total",
		Help: "xDS streams closed because the client sent requests faster than the per-client limit.",
	})
)

func init() {
	metrics.Registry.MustRegister(pushSeconds, nacks, responses, responseBytes, clients, rateLimited, streamsRefused)
}
