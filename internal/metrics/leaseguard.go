package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The labels of a per-registry series.
const labelNamespace, labelServiceRegistry = "namespace", "serviceregistry"

// DeregistrationsHeld counts, per ServiceRegistry, the endpoints the node Lease guard keeps
// in the store although their node's Lease lapsed, because too many lapsed at once.
var DeregistrationsHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "registrar_deregistrations_held",
	Help: "Endpoints kept in the store although their node's Lease lapsed, because more than --node-lease-guard-share of the registry's or the cluster's endpoints lapsed at once (the DeregistrationHeld condition).",
}, []string{labelNamespace, labelServiceRegistry})

func init() {
	metrics.Registry.MustRegister(DeregistrationsHeld)
}
