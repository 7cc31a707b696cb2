// Package metrics defines registrar's Prometheus metrics, registered on controller-runtime's
// registry and so served on the manager's metrics endpoint.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/registrar-dev/registrar/internal/store"
)

// lagBuckets spans a store write on loopback (ms) to a lost node (tens of seconds).
var lagBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

var (
	// DeregistrationLag is the time from the pod change Kubernetes recorded (deletion
	// request, containers not ready; one-second resolution) to the store acknowledging the
	// endpoint's removal.
	DeregistrationLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "registrar_deregistration_lag_seconds",
		Help:    "Time from the pod change that made an endpoint ineligible (as recorded by Kubernetes, 1 s resolution) to the store acknowledging its removal.",
		Buckets: lagBuckets,
	})
	// RegistrationLag is the time from the pod's ContainersReady transition to the store
	// acknowledging its endpoint; it includes the warm-up of gated pods.
	RegistrationLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "registrar_registration_lag_seconds",
		Help:    "Time from a pod's ContainersReady transition (1 s resolution) to the store acknowledging its endpoint, warm-up included.",
		Buckets: lagBuckets,
	})
	// StoreOperationDuration times each store call by operation (list, apply).
	StoreOperationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "registrar_store_operation_duration_seconds",
		Help:    "Duration of store calls by operation.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"operation"})
	// StoreOperationErrors counts failed store calls by operation and kind (conflict, error).
	StoreOperationErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_store_operation_errors_total",
		Help: "Failed store calls by operation and kind (conflict: the store changed since it was read; error: anything else).",
	}, []string{"operation", labelKind})
	// StoreTransactions counts the transactions the etcd store sent; StoreTransactionItems
	// how many registries' changes each carried (more than one when batched under load).
	StoreTransactions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "registrar_store_transactions_total",
		Help: "Transactions sent to the etcd store (batched under load: see registrar_store_transaction_items).",
	})
	StoreTransactionItems = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "registrar_store_transaction_items",
		Help:    "Registry changes (Applies, or parts of a split one) carried by each etcd store transaction: 1 when idle, more when changes queue.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	})
	// StoreRepairs counts owned records that something other than registrar changed in a
	// store, and registrar repaired, by store and kind (deleted, rewritten, extra).
	StoreRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_store_repairs_total",
		Help: "Owned store records changed by anything but registrar and repaired, by store and kind (deleted: written again, rewritten: restored, extra: removed).",
	}, []string{"store", labelKind})
	// Reconciles counts ServiceRegistry reconciles by what enqueued them (the trigger label:
	// see internal/controller/ctrlrt/triggers.go), so that reconciles per pod transition can be read.
	Reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_reconciles_total",
		Help: "ServiceRegistry reconciles by what enqueued them: pod (a pod it selects, or selected, changed), registry (the registry itself changed), service-peer (another registry of its service changed), store-watch (a store change its known records did not explain), store-resync (the periodic re-read, or a store watch that missed changes), store-recovered (the store answers again), lease (a node Lease renewed after a lapse), requeue (the reconcile asked to come back, or a retry after an error).",
	}, []string{"trigger"})
	// Endpoints counts the pods of each ServiceRegistry by endpoint state.
	Endpoints = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_endpoints",
		Help: "Pods selected by each ServiceRegistry, by endpoint state (Pending, WarmingUp, Registered, Unready, Draining).",
	}, []string{"namespace", "serviceregistry", "state"})
	// WarmupDuration times warm-ups by outcome (succeeded, failed, proceeded).
	WarmupDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "registrar_warmup_duration_seconds",
		Help:    "Duration of pod warm-ups by outcome (succeeded, failed: kept out under onFailure=Block, proceeded: registered under onFailure=Proceed).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"outcome"})
	// WebhookInjections counts pod admissions by result (injected, skipped, error).
	WebhookInjections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_webhook_injections_total",
		Help: "Pods admitted by the webhook, by result (injected, skipped: nothing selects the pod or it was already injected, error: admitted unchanged).",
	}, []string{"result"})
	// EndpointEventsSkipped counts the per-endpoint Events (Registered, Deregistered) left
	// out because they came faster than --endpoint-events-qps allows.
	EndpointEventsSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_endpoint_events_skipped_total",
		Help: "Per-endpoint Events not emitted because they exceeded the operator-wide rate (--endpoint-events-qps), by reason (Registered, Deregistered).",
	}, []string{"reason"})
	// EventsDropped counts Events recorded but not written (internal/eventqueue).
	EventsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_events_dropped_total",
		Help: "Events recorded but not written, by the Event's reason and why: QueueFull (1,000 waiting to be written), WriteFailed (the API server refused or did not answer within 10 s; not retried), Invalid (an object the scheme cannot refer to).",
	}, []string{"reason", "why"})
	// GatesReleased counts gates registrar set True on pods no ServiceRegistry manages any
	// more (registry deleted, selector changed), so that they do not stay unready for ever.
	GatesReleased = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "registrar_gates_released_total",
		Help: "Readiness gates set True (reason Released) on pods no ServiceRegistry manages any more.",
	})
	// Unmutated counts, per ServiceRegistry, selected pods that lack the readiness gate or
	// the preStop drain the registry's injection would have added (admitted while the webhook
	// was unreachable: failurePolicy Ignore).
	Unmutated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_unmutated_pods",
		Help: "Pods selected by a ServiceRegistry with injection enabled that lack the registrar.dev/ready gate or the preStop drain (admitted while the webhook was unreachable).",
	}, []string{"namespace", "serviceregistry"})
	// StatusWrites counts the ServiceRegistry status writes by whether they were urgent (a
	// condition or observedGeneration changed: written at once) or paced (counts,
	// status.endpoints and messages only: at most one per --status-write-interval per
	// registry).
	StatusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_status_writes_total",
		Help: "ServiceRegistry status writes accepted by the API server, by kind: urgent (a condition or observedGeneration changed; written at once) or paced (counts, status.endpoints, messages; at most one per --status-write-interval per registry).",
	}, []string{labelKind})
	// StatusWritesDeferred counts the paced status writes that waited for the operator-wide
	// budget (--status-writes-qps).
	StatusWritesDeferred = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "registrar_status_writes_deferred_total",
		Help: "Paced ServiceRegistry status writes (counts, status.endpoints, messages) that waited for the operator-wide budget of --status-writes-qps; urgent writes never wait.",
	})
)

// labelKind is the label of the metrics that count something by its kind.
const labelKind = "kind"

func init() {
	metrics.Registry.MustRegister(DeregistrationLag, RegistrationLag, StoreOperationDuration, StoreOperationErrors, StoreRepairs,
		StoreTransactions, StoreTransactionItems, Reconciles,
		Endpoints, WarmupDuration, WebhookInjections, EndpointEventsSkipped, EventsDropped, GatesReleased, Unmutated, StatusWrites, StatusWritesDeferred)
}

// ObserveStore records one store call (a store.Observer).
func ObserveStore(operation string, took time.Duration, err error) {
	StoreOperationDuration.WithLabelValues(operation).Observe(took.Seconds())
	if err != nil {
		StoreOperationErrors.WithLabelValues(operation, store.ErrorKind(err)).Inc()
	}
}

// ObserveStoreTxn records one etcd store transaction of items registry changes (an
// etcd.Options.OnTxn).
func ObserveStoreTxn(items, _ int) {
	StoreTransactions.Inc()
	StoreTransactionItems.Observe(float64(items))
}

// EventDropped counts an Event its writer dropped (internal/eventqueue's OnDrop).
func EventDropped(eventReason, why string) {
	EventsDropped.WithLabelValues(eventReason, why).Inc()
}
