package controlplane

import (
	"strings"

	"github.com/registrar-dev/registrar/test/support/metrics"
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
	// StoreTxns are the etcd store transactions the operator sent (every Apply, batched under
	// load: registrar_store_transactions_total); StoreTxnItems the registry changes they
	// carried (registrar_store_transaction_items' sum).
	StoreTxns     int `json:"storeTxns"`
	StoreTxnItems int `json:"storeTxnItems"`
	// ReconcilesByTrigger are the ServiceRegistry reconciles by what enqueued them
	// (registrar_reconciles_total{trigger}).
	ReconcilesByTrigger map[string]int `json:"reconcilesByTrigger,omitempty"`
}

// reconcilesPrefix keys registrar_reconciles_total's samples in metricSums, by trigger.
const reconcilesPrefix = "registrar_reconciles_total:"

// metricSums adds up the samples of each name whose labels contain every filter.
type metricSums map[string]float64

func sumMetrics(samples metrics.Samples) metricSums {
	sums := metricSums{}
	for _, s := range samples {
		switch {
		case strings.HasPrefix(s.Name, "workqueue_") && strings.Contains(s.Labels, `controller="serviceregistry"`):
			sums[s.Name] += s.Value
		case s.Name == "registrar_store_transactions_total" || s.Name == "registrar_store_transaction_items_sum":
			sums[s.Name] += s.Value
		case s.Name == "registrar_reconciles_total":
			trigger, _ := labelValue(s.Labels, "trigger")
			sums[reconcilesPrefix+trigger] += s.Value
		case s.Name == "rest_client_requests_total":
			for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
				if strings.Contains(s.Labels, `method="`+m+`"`) {
					sums["api_"+m] += s.Value
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
		StoreTxns:     int(d("registrar_store_transactions_total")),
		StoreTxnItems: int(d("registrar_store_transaction_items_sum")),
	}
	st.APIWrites = int(d("api_POST") + d("api_PUT") + d("api_PATCH") + d("api_DELETE"))
	for k := range after {
		if trigger, ok := strings.CutPrefix(k, reconcilesPrefix); ok && d(k) > 0 {
			if st.ReconcilesByTrigger == nil {
				st.ReconcilesByTrigger = map[string]int{}
			}
			st.ReconcilesByTrigger[trigger] = int(d(k))
		}
	}
	if n := d("workqueue_queue_duration_seconds_count"); n > 0 {
		st.QueueWaitMs = d("workqueue_queue_duration_seconds_sum") / n * 1000
	}
	if n := d("workqueue_work_duration_seconds_count"); n > 0 {
		st.ReconcileMs = d("workqueue_work_duration_seconds_sum") / n * 1000
	}
	return st
}
