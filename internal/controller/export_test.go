package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller/statuswriter"
	"github.com/registrar-dev/registrar/internal/regstatus"
	"github.com/registrar-dev/registrar/internal/selindex"
)

// IndexStats returns the work the selector index counted in a namespace.
func (r *ServiceRegistryReconciler) IndexStats(ns string) selindex.Stats { return r.index.Stats(ns) }

// StatusWriter exposes the status writer to the envtest suite.
type StatusWriter struct{ w *statuswriter.Writer }

// NewStatusWriter returns a status writer with one worker writing through c, every change at
// once.
func NewStatusWriter(c client.Client) *StatusWriter {
	return &StatusWriter{w: statuswriter.New(c, statuswriter.Config{Workers: 1, RetryBase: 10 * time.Millisecond, RetryMax: time.Second})}
}

// NewPacedStatusWriter returns a status writer with one worker writing through c that paces
// each registry's writes by interval on clk.
func NewPacedStatusWriter(c client.Client, interval time.Duration, clk clock.WithTicker) *StatusWriter {
	return &StatusWriter{w: statuswriter.New(c, statuswriter.Config{
		Workers: 1, RetryBase: 10 * time.Millisecond, RetryMax: time.Second, Interval: interval, Clock: clk,
	})}
}

// NewBudgetedStatusWriter returns a status writer with one worker writing through c, every
// change at once but the non-urgent ones within an operator-wide budget of qps writes per
// second (burst qps) on clk.
func NewBudgetedStatusWriter(c client.Client, qps int, clk clock.WithTicker) *StatusWriter {
	return &StatusWriter{w: statuswriter.New(c, statuswriter.Config{
		Workers: 1, RetryBase: 10 * time.Millisecond, RetryMax: time.Second, Clock: clk, QPS: float64(qps), Burst: qps,
	})}
}

// Submit hands the writer the newest status of a registry, computed over reg's status: it is
// urgent as the reconciler's would be (regstatus.Urgent).
func (s *StatusWriter) Submit(reg *v1beta1.ServiceRegistry, st v1beta1.ServiceRegistryStatus) {
	s.w.Submit(client.ObjectKeyFromObject(reg), reg.UID, st, regstatus.Urgent(reg.Status, st))
}

// Start runs the writer until ctx is done.
func (s *StatusWriter) Start(ctx context.Context) error { return s.w.Start(ctx) }

// Holds reports whether the writer still holds a status for the registry.
func (s *StatusWriter) Holds(name types.NamespacedName) bool { return s.w.Holds(name) }
