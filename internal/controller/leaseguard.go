package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/leaseguard"
	"github.com/registrar-dev/registrar/internal/metrics"
)

// The guard against mass false deregistration (issue 19, item 5): the decision is
// leaseguard's; this file gathers its counts, applies the hold to the reconcile's verdicts
// and reports it (condition, Events, registrar_deregistrations_held).

// guardHold is one reconcile's hold: the decision, and how many endpoints it kept.
type guardHold struct {
	decision leaseguard.Decision
	held     int
}

// reconcileLeaseGuard is the phase after the verdicts: it records the registry's placement
// (leaseguard.PlacementOf), counts its endpoints and the cluster's on lapsed nodes (or nodes about to lapse:
// leaseguard.Lapsing; evaluated only when some pod of the registry is on a lapsed node, one
// cached Lease read per node), and, when leaseguard decides to
// hold, decides again every pod with the NodeLeaseExpired verdict whose endpoint is in the
// store, with the hold as a fact (eligibility.Facts.DeregistrationHeld: Registered, reason
// DeregistrationHeld). Pods of a node whose Node or Lease the API
// server deleted are neither counted nor held: a deletion is no sign of blindness. Verdicts for the pods' own status are never
// touched: they come before the node Lease in the verdict chain.
func (r *ServiceRegistryReconciler) reconcileLeaseGuard(ctx context.Context, s *reconcileScope) (ctrl.Result, error) {
	if r.NodeLeaseTimeout <= 0 {
		return ctrl.Result{}, nil
	}
	name := client.ObjectKeyFromObject(s.reg)
	placement, lapsed := leaseguard.PlacementOf(s.All, func(node string) bool { return nodeGone(s, node) })
	r.nodes.Place(name, placement)
	if len(lapsed) == 0 || !r.nodes.GuardEnabled() { // no removal to hold
		metrics.DeregistrationsHeld.WithLabelValues(s.reg.Namespace, s.reg.Name).Set(0)
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()
	d := r.nodes.DecideHold(ctx, placement, lapsed, now)
	// A hold that ends while nodes are still lapsed (the Leases come back one by one, the share
	// falls under the threshold) gives those nodes a fresh bound from now, as the node
	// lifecycle controller resets every node's probe time when it leaves full disruption:
	// otherwise the last nodes to be seen renewing would be deregistered on the way out.
	grace := !d.Hold && meta.FindStatusCondition(s.originalStatus.Conditions, v1beta1.ConditionDeregistrationHeld) != nil
	held := 0
	if d.Hold || grace {
		registered := r.registeredPods(s)
		for i, p := range s.selected {
			if p.verdict.Reason != v1beta1.ReasonNodeLeaseExpired || !registered[p.pod.Name] || nodeGone(s, p.pod.Spec.NodeName) {
				continue
			}
			if d.Trickle && r.nodes.Released(p.pod.Spec.NodeName, now) {
				continue
			}
			if grace {
				if l, ok := r.nodes.Lease(ctx, p.pod.Spec.NodeName); ok && !l.Gone() {
					r.nodes.Restart(p.pod.Spec.NodeName, l.RenewTime, now)
				}
			}
			// Decided again with the hold as a fact: the verdict chain keeps it Registered
			// (DeregistrationHeld). No older registry claims it: its verdict was the node's.
			p = r.decide(ctx, s, p.pod, nil, true)
			if !p.verdict.Eligible() {
				continue
			}
			s.selected[i] = p
			s.desired[p.pod.Name] = p.endpoint
			held++
		}
		if held > 0 && grace {
			log.FromContext(ctx).Info("node Lease hold ended: nodes still lapsed get a fresh bound", "kept", held)
			held = 0
		}
		if held > 0 {
			s.hold = &guardHold{decision: d, held: held}
			log.FromContext(ctx).Info("holding node Lease deregistrations", "held", held, "scope", d.Scope,
				"state", d.State.String(), "lapsedEndpoints", d.Counts.Lapsed, "endpoints", d.Counts.Endpoints,
				"lapsedNodes", d.Counts.LapsedNodes, "nodes", d.Counts.Nodes)
		}
	}
	metrics.DeregistrationsHeld.WithLabelValues(s.reg.Namespace, s.reg.Name).Set(float64(held))
	return ctrl.Result{}, nil
}

// nodeGone reports whether the reconcile saw the node's Node or Lease deleted (by the API
// server: no blindness to guard against).
func nodeGone(s *reconcileScope, node string) bool {
	l := s.leases[node]
	return l != nil && l.Gone()
}

// registeredPods are the registry's pods whose endpoint is in a store, as far as the operator
// knows: in the records it last read or wrote, or Registered in the status it last reported
// (which survives a restart of the operator). Only their removal is held: a pod on a lapsed
// node that is not registered stays out.
func (r *ServiceRegistryReconciler) registeredPods(s *reconcileScope) map[string]bool {
	out := map[string]bool{}
	uid := map[string]string{}
	for _, p := range s.selected {
		uid[p.pod.Name] = string(p.pod.UID)
	}
	for _, e := range s.originalStatus.Endpoints {
		if e.State == v1beta1.EndpointRegistered && e.UID == uid[e.Pod] {
			out[e.Pod] = true
		}
	}
	r.syncer.MarkRecorded(client.ObjectKeyFromObject(s.reg), s.reg.UID, uid, out)
	return out
}

// forgetLeaseGuard drops a registry that is gone from the cluster's counts.
func (r *ServiceRegistryReconciler) forgetLeaseGuard(name types.NamespacedName) {
	r.nodes.Place(name, nil)
	metrics.DeregistrationsHeld.DeleteLabelValues(name.Namespace, name.Name)
}
