package xds

// The metrics of the streams and their clients are internal/xds/clients'.

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// labelType is the label of the xDS resource type.
const labelType = "type"

var (
	publishes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_xds_cache_updates_total",
		Help: "Changes written into the xDS caches, by type (one per changed registry and type).",
	}, []string{labelType})
	gateAckTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "registrar_xds_gate_ack_timeouts_total",
		Help: "Readiness gates opened after --xds-gate-ack-timeout although a subscribed xDS client had not acknowledged the pod (a dead or stuck client).",
	})
)

func init() {
	metrics.Registry.MustRegister(publishes, gateAckTimeouts)
}
