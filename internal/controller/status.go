package controller

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/controller/report"
	"github.com/registrar-dev/registrar/internal/controller/storesync"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/injector"
	"github.com/registrar-dev/registrar/internal/leaseguard"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/monitor"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/regstatus"
)

// The status step of a ServiceRegistry reconcile (Reconcile's deferred patchStatus): the
// facts the reconcile gathered and decided are handed to regstatus.Build, the one place where
// status and conditions are computed (all of them: Ready, StoreSynced, DrainSufficient,
// Configured, PodsInjected, Reconciling, Stalled, StoreHealthy, DeregistrationHeld,
// XDSPublished); what changed is then reported (Events, the endpoint-state gauges) and the
// status handed to the status writer. Publishing to xDS is not part of it (patchStatus does it
// before, once per reconcile).

// submitStatus computes the status from the reconcile's facts and, when it changed, emits an Event for
// every condition that changed status or reason and hands the status to the status writer,
// which writes it off the reconcile path.
func (r *ServiceRegistryReconciler) submitStatus(s *reconcileScope, in regstatus.Input) {
	s.reg.Status = regstatus.Build(s.originalStatus, in)
	r.reportStatus(s, in)
	if equality.Semantic.DeepEqual(s.originalStatus, s.reg.Status) {
		return
	}
	r.report.ConditionEvents(s.reg, s.originalStatus)
	r.status.Submit(client.ObjectKeyFromObject(s.reg), s.reg.UID, s.reg.Status, regstatus.Urgent(s.originalStatus, s.reg.Status))
}

// statusInput gathers the facts of the reconcile the status is built from (all but
// Published, the xDS server's answer, which patchStatus adds once it published).
func (r *ServiceRegistryReconciler) statusInput(s *reconcileScope) regstatus.Input {
	return regstatus.Input{
		Generation:  s.reg.Generation,
		ServiceName: s.target.Service,
		Pods:        r.statusPods(s),
		Stored:      s.stored,
		Conflicts:   s.plan.Conflicts,
		Overlaps:    s.overlaps,
		SelectorErr: s.selErr,
		Refused:     s.refused,
		StoreErr:    s.storeErr,
		StoreName:   r.StoreName,
		Drain:       r.drainInput(s.reg),
		Config: regstatus.Configuration{
			Generated: s.reg.Labels[v1beta1.LabelDeployment] != "",
			Problems:  s.reg.Annotations[v1beta1.AnnotationConfigError],
		},
		Injection:   injectionInput(s),
		Stores:      storesync.Statuses(s.stores, s.reg.UID, s.originalStatus.Stores),
		StoreHealth: r.storeHealth(s),
		Hold:        holdInput(s),
		Now:         r.Clock.Now(),
	}
}

// reportStatus sets the gauges of what the status reports (registrar_endpoints by state,
// registrar_unmutated_pods) and emits the Normal DeregistrationResumed Event when a hold
// ended (the Warning Event when it comes is report.Reporter.ConditionEvents').
func (r *ServiceRegistryReconciler) reportStatus(s *reconcileScope, in regstatus.Input) {
	report.EndpointStates(s.reg, s, s.stored)
	if in.Injection == nil {
		metrics.Unmutated.DeleteLabelValues(s.reg.Namespace, s.reg.Name)
	} else {
		metrics.Unmutated.WithLabelValues(s.reg.Namespace, s.reg.Name).Set(float64(len(in.Injection.Unmutated)))
	}
	if in.Hold == nil && meta.FindStatusCondition(s.originalStatus.Conditions, v1beta1.ConditionDeregistrationHeld) != nil {
		r.Recorder.Eventf(s.reg, nil, corev1.EventTypeNormal, v1beta1.EventDeregistrationResumed, "Reconcile",
			"node Lease deregistrations resume: the Leases were renewed or the share of lapsed endpoints fell under the threshold")
	}
}

// injectionInput finds, for a registry with injection enabled, the selected pods the webhook
// did not mutate (no registrar.dev/injected annotation: admitted while the webhook was
// unreachable, its failurePolicy being Ignore, or created before the registry). Nil when
// injection is not enabled.
func injectionInput(s *reconcileScope) *regstatus.Injection {
	if !injector.Enabled(s.reg) {
		return nil
	}
	in := &regstatus.Injection{}
	for _, p := range s.selected {
		if p.pod.DeletionTimestamp != nil {
			continue
		}
		if _, injected := p.pod.Annotations[v1beta1.AnnotationInjected]; injected {
			continue
		}
		lacks := "the preStop drain"
		if !eligibility.HasGate(p.pod) {
			lacks = "the readiness gate and the preStop drain"
		}
		in.Unmutated = append(in.Unmutated, regstatus.Unmutated{Pod: p.pod.Name, Lacks: lacks})
	}
	sort.Slice(in.Unmutated, func(i, j int) bool { return in.Unmutated[i].Pod < in.Unmutated[j].Pod })
	return in
}

func (r *ServiceRegistryReconciler) statusPods(s *reconcileScope) []regstatus.Pod {
	pods := make([]regstatus.Pod, len(s.selected))
	drain := injector.DrainSeconds(s.reg)
	for i, p := range s.selected {
		pods[i] = regstatus.Pod{Name: p.pod.Name, UID: string(p.pod.UID), IP: p.pod.Status.PodIP,
			Verdict: p.verdict, DrainUntil: eligibility.DrainUntil(p.pod, drain)}
	}
	return pods
}

func (r *ServiceRegistryReconciler) drainInput(reg *v1beta1.ServiceRegistry) regstatus.Drain {
	d := regstatus.Drain{Seconds: injector.DrainSeconds(reg), CallerCacheSeconds: r.CallerCacheSeconds, DeregistrationLag: r.report.MaxLag(reg.UID)}
	if reg.Spec.Drain != nil && reg.Spec.Drain.CallerCacheSeconds != nil {
		d.CallerCacheSeconds = *reg.Spec.Drain.CallerCacheSeconds
	}
	if lr, ok := r.Publisher.(publish.LagReporter); ok {
		d.XDSPushLag = lr.PushLag(types.NamespacedName{Namespace: reg.Namespace, Name: reg.Name})
	}
	return d
}

// StoreHealthSource gives the self-monitoring verdict on the named stores (all monitored
// stores when names is empty): a monitor.Set in production.
type StoreHealthSource interface {
	Verdict(names []string) monitor.Verdict
}

// storeHealth is the self-monitoring verdict (r.StoreHealth) on the stores the registry
// publishes to; nil while the verdict is unknown, or without a source.
func (r *ServiceRegistryReconciler) storeHealth(s *reconcileScope) *regstatus.StoreHealth {
	if r.StoreHealth == nil {
		return nil
	}
	var names []string
	for _, res := range s.stores {
		names = append(names, res.Name)
	}
	v := r.StoreHealth.Verdict(names)
	if !v.Known {
		return nil
	}
	return &regstatus.StoreHealth{OK: v.OK, Reason: v.Reason, Message: v.Message}
}

// holdInput is the node Lease guard's hold of this reconcile (leaseguard.go), if any.
func holdInput(s *reconcileScope) *regstatus.Hold {
	if s.hold == nil {
		return nil
	}
	reason := v1beta1.ReasonNodeLeasesLapsedInRegistry
	if s.hold.decision.Scope == leaseguard.ScopeCluster {
		reason = v1beta1.ReasonNodeLeasesLapsedInCluster
	}
	return &regstatus.Hold{Reason: reason, Message: s.hold.decision.Message(s.hold.held)}
}

// publishedInput is the xDS server's answer to this reconcile's publish, if it published.
func publishedInput(s *reconcileScope) *regstatus.Published {
	if s.published == nil {
		return nil
	}
	res := *s.published
	return &regstatus.Published{OK: res.OK(), Reason: res.Reason, Message: res.Message}
}
