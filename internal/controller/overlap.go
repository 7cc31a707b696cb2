package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

// Two ServiceRegistries of one namespace with the same service name write into the same
// store scope. Where their selectors overlap — both select a pod — the OLDER registry (by
// creationTimestamp, then name) owns that pod: the younger one neither writes its key, nor
// warms it up, nor touches its gate, and reports Ready=False with reason SelectorOverlap
// naming the older registry. Pods only one of them selects are published by that one, so
// registries with disjoint selectors can share a service (e.g. stable and canary).

// ConflictRetry is how often a registry whose keys another owner holds looks again: nothing
// in Kubernetes signals that, say, another installation released a key.
const ConflictRetry = 30 * time.Second

// claim is an older registry of the same service and namespace, with its selector.
type claim struct {
	name     string
	selector labels.Selector
}

// olderClaims returns the registries of reg's namespace that own, before reg, a pod both
// select (eligibility.Overlaps): older by the shared "oldest registry first" order, same
// service name, at least one store in common, not being deleted (a registry stuck
// finalizing claims nothing), with a usable selector.
func (r *ServiceRegistryReconciler) olderClaims(ctx context.Context, reg *v1beta1.ServiceRegistry) ([]claim, error) {
	// Read-only (names, creation times, selectors, once per reconcile): no deep copies
	// (docs/development.md, "Benchmark history").
	regs, err := r.cache.SameService(ctx, reg.Namespace, reg.ResolvedServiceName())
	if err != nil {
		return nil, err
	}
	self := eligibility.ClaimantWith(reg, r.selectorOf)
	var out []claim
	for _, o := range regs {
		other := eligibility.ClaimantWith(o, r.selectorOf)
		if other.Deleting || other.Selector == nil || !eligibility.Overlaps(other, self) {
			continue // it writes nothing we would, so it claims nothing
		}
		out = append(out, claim{name: other.Name, selector: other.Selector})
	}
	return out, nil
}

// selectorOf is the registry's parsed label selector, remembered (selindex.Parsed).
func (r *ServiceRegistryReconciler) selectorOf(reg *v1beta1.ServiceRegistry) (labels.Selector, error) {
	return r.selectors.Of(client.ObjectKeyFromObject(reg), &reg.Spec.Selector)
}

// olderClaimOn names the first older registry that claims the pod, or "".
func olderClaimOn(pod *corev1.Pod, older []claim) string {
	set := labels.Set(pod.Labels)
	for _, c := range older {
		if c.selector.Matches(set) {
			return c.name
		}
	}
	return ""
}

// conflictRequeue brings a registry with key conflicts back after ConflictRetry at the latest.
func conflictRequeue(s *reconcileScope, res ctrl.Result) ctrl.Result {
	if len(s.plan.Conflicts) > 0 && (res.RequeueAfter <= 0 || res.RequeueAfter > ConflictRetry) {
		res.RequeueAfter = ConflictRetry
	}
	return res
}
