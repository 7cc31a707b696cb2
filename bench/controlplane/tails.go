package controlplane

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/registrar-dev/registrar/test/support/metrics"
)

// Tails are p99s over the measured phase, read from the histograms of the operator and of
// the two etcd servers (the difference of two scrapes): where the part of registrar's
// deregistration lag beyond the API watch floor can go. Each is as coarse as its histogram's
// buckets (interpolated inside one, as Prometheus' histogram_quantile does); omitted when the
// histogram had no observation or could not be read.
type Tails struct {
	// QueueWaitP99Ms: a ServiceRegistry's wait in the work queue (workqueue_queue_duration_seconds;
	// buckets a factor 10 apart).
	QueueWaitP99Ms *float64 `json:"queueWaitP99Ms,omitempty"`
	// ReconcileP99Ms: one reconcile, the store write included (workqueue_work_duration_seconds).
	ReconcileP99Ms *float64 `json:"reconcileP99Ms,omitempty"`
	// StoreApplyP99Ms: the store write as the reconcile waits for it, batching included
	// (registrar_store_operation_duration_seconds{operation="apply"}).
	StoreApplyP99Ms *float64 `json:"storeApplyP99Ms,omitempty"`
	// StoreFsyncP99Ms and StoreBackendCommitP99Ms: the store etcd's WAL fsync and backend
	// commit (etcd_disk_wal_fsync_duration_seconds, etcd_disk_backend_commit_duration_seconds;
	// their sum is StoreCommit's).
	StoreFsyncP99Ms         *float64 `json:"storeWalFsyncP99Ms,omitempty"`
	StoreBackendCommitP99Ms *float64 `json:"storeBackendCommitP99Ms,omitempty"`
	// KubeEtcdFsyncP99Ms: the same for the API server's etcd, which every pod write (the
	// floor) waits for, on the same disk.
	KubeEtcdFsyncP99Ms *float64 `json:"kubeEtcdWalFsyncP99Ms,omitempty"`
}

// histogram is one histogram's cumulative bucket counts by upper bound, summed over the
// series whose labels contain every filter.
type histogram map[float64]float64

func histogramOf(samples metrics.Samples, name string, filters ...string) histogram {
	h := histogram{}
	for _, s := range samples {
		if s.Name != name+"_bucket" {
			continue
		}
		ok := true
		for _, f := range filters {
			ok = ok && strings.Contains(s.Labels, f)
		}
		if !ok {
			continue
		}
		le, found := labelValue(s.Labels, "le")
		if !found {
			continue
		}
		bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses to +Inf
		if err != nil {
			continue
		}
		h[bound] += s.Value
	}
	return h
}

// labelValue is the value of label name in a label set as exposed (`a="1",le="0.5"`).
func labelValue(labels, name string) (string, bool) {
	for part := range strings.SplitSeq(labels, ",") {
		k, v, ok := strings.Cut(part, "=")
		if ok && k == name {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}

// quantileMs is the q-quantile, in milliseconds, of what after observed beyond before (both
// histograms in seconds): the difference of the cumulative buckets, then PromQL's
// histogram_quantile (bucketQuantile); NaN without observations. A quantile in the +Inf
// bucket is the largest finite bound.
func quantileMs(before, after histogram, q float64) float64 {
	return bucketQuantile(q, deltaBuckets(before, after)) * 1000
}

// kubeEtcdURL is host:port of the API server's etcd, whose client port serves /metrics.
func (cl *cluster) kubeEtcdURL() string {
	if cl.env == nil || cl.env.ControlPlane.Etcd == nil || cl.env.ControlPlane.Etcd.URL == nil {
		return ""
	}
	return cl.env.ControlPlane.Etcd.URL.Host
}

// scrapes are one reading of the operator's and both etcd servers' /metrics: the operator's
// samples, and each etcd's histograms of etcdHistograms (parsed with expfmt).
type scrapes struct {
	operator        metrics.Samples
	store, kubeEtcd map[string]histogram
}

// etcdHistograms are the histograms read from each etcd server.
var etcdHistograms = []string{etcdWALFsync, etcdBackendCommit}

// scrapeMetrics reads the three /metrics (when says which reading: before, after). The
// operator's must be read (its counters are the run's OperatorStats); an etcd server's that
// cannot be read is left nil (its tails and the store commit are omitted) and logged. The
// store etcd's text is kept in the run's directory (store-etcd-metrics-<when>.txt).
func (r *runner) scrapeMetrics(ctx context.Context, when string) (scrapes, error) {
	var t scrapes
	var err error
	if t.operator, err = metrics.Scrape(ctx, r.cl.metrics); err != nil {
		return t, fmt.Errorf("scrape operator metrics: %w", err)
	}
	read := func(what, addr string) ([]byte, map[string]histogram) {
		h, text, err := scrapeHistograms(ctx, addr, etcdHistograms...)
		if err != nil {
			r.c.Logf("tails: scrape %s: %v", what, err)
		}
		return text, h
	}
	text, store := read("store etcd", strings.TrimPrefix(r.cl.store.Endpoint(), "http://"))
	t.store = store
	if len(text) > 0 {
		if err := os.WriteFile(filepath.Join(r.c.WorkDir, "store-etcd-metrics-"+when+".txt"), text, 0o644); err != nil {
			r.c.Logf("tails: %v", err)
		}
	}
	if u := r.cl.kubeEtcdURL(); u != "" {
		_, t.kubeEtcd = read("kube-apiserver's etcd", u)
	}
	return t, nil
}

// bothRead are an etcd server's histograms of two scrapes, both nil unless both were read: a
// difference from a failed first scrape would count the setup too.
func bothRead(before, after map[string]histogram) (map[string]histogram, map[string]histogram) {
	if before == nil || after == nil {
		return nil, nil
	}
	return before, after
}

// tailsBetween are the tails of what happened between two scrapes.
func tailsBetween(before, after scrapes) *Tails {
	before.store, after.store = bothRead(before.store, after.store)
	before.kubeEtcd, after.kubeEtcd = bothRead(before.kubeEtcd, after.kubeEtcd)
	p99 := func(b, a histogram) *float64 {
		v := quantileMs(b, a, 0.99)
		if math.IsNaN(v) {
			return nil // JSON has no NaN
		}
		return &v
	}
	op := func(name string, filters ...string) *float64 {
		return p99(histogramOf(before.operator, name, filters...), histogramOf(after.operator, name, filters...))
	}
	const sr = `controller="serviceregistry"`
	return &Tails{
		QueueWaitP99Ms:          op("workqueue_queue_duration_seconds", sr),
		ReconcileP99Ms:          op("workqueue_work_duration_seconds", sr),
		StoreApplyP99Ms:         op("registrar_store_operation_duration_seconds", `operation="apply"`),
		StoreFsyncP99Ms:         p99(before.store[etcdWALFsync], after.store[etcdWALFsync]),
		StoreBackendCommitP99Ms: p99(before.store[etcdBackendCommit], after.store[etcdBackendCommit]),
		KubeEtcdFsyncP99Ms:      p99(before.kubeEtcd[etcdWALFsync], after.kubeEtcd[etcdWALFsync]),
	}
}
