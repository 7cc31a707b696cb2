package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
	regs, err := r.sameService(ctx, reg.Namespace, reg.ResolvedServiceName())
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

// registriesOfService maps a ServiceRegistry event to the other registries of its namespace
// with the same service name (called with both the old and the new object of an update), so
// that a younger registry yields or takes over as soon as an older one changes, and an older
// one takes over the keys a younger one released.
func (r *ServiceRegistryReconciler) registriesOfService(ctx context.Context, obj client.Object) []reconcile.Request {
	changed, ok := obj.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil
	}
	regs, err := r.sameService(ctx, changed.Namespace, changed.ResolvedServiceName())
	if err != nil {
		log.FromContext(ctx).Error(err, "list ServiceRegistries of a service", "namespace", changed.Namespace)
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range regs {
		if o.UID != changed.UID {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}

// peersOf maps a ServiceRegistry event to the registries its change may concern: those of
// its namespace with the same service name (registriesOfService), and those of other
// namespaces with the same name (registriesOfName: ownership of the name).
func (r *ServiceRegistryReconciler) peersOf(ctx context.Context, obj client.Object) []reconcile.Request {
	return append(r.registriesOfService(ctx, obj), r.registriesOfName(ctx, obj)...)
}

// registryServiceField indexes ServiceRegistries by the service name they publish, so that
// the registries of one service are found without reading the namespace's.
const registryServiceField = "registrar.dev/service-name"

func registryServiceName(o client.Object) []string {
	reg, ok := o.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil
	}
	return []string{reg.ResolvedServiceName()}
}

// registryServiceIndex is the registry informer's own index by namespace and service name
// (registryServiceKey), read directly by sameService when the cache gives the informer's
// indexer.
const registryServiceIndex = "registrar.dev/namespace-service"

func registryServiceKey(ns, service string) string { return ns + "/" + service }

func indexRegistryByService(obj any) ([]string, error) {
	reg, ok := obj.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil, nil
	}
	return []string{registryServiceKey(reg.Namespace, reg.ResolvedServiceName())}, nil
}

// registryIndexer is the read sameService makes of the registry informer's indexer.
type registryIndexer interface {
	ByIndex(indexName, indexedValue string) ([]any, error)
}

// sameService returns the ServiceRegistries of a namespace publishing a service name, as the
// cache's own objects (read-only: never to be modified): from the registry informer's index
// when the reconciler has it (no REST mapping, no list built per call: it runs for every
// reconcile and every store change), else through the cache's field index, else (a plain
// client) by listing the namespace's and keeping those of the service.
func (r *ServiceRegistryReconciler) sameService(ctx context.Context, ns, service string) ([]*v1beta1.ServiceRegistry, error) {
	if r.registries != nil {
		objs, err := r.registries.ByIndex(registryServiceIndex, registryServiceKey(ns, service))
		if err != nil {
			return nil, fmt.Errorf("ServiceRegistries of service %s/%s from the index: %w", ns, service, err)
		}
		out := make([]*v1beta1.ServiceRegistry, 0, len(objs))
		for _, o := range objs {
			if reg, ok := o.(*v1beta1.ServiceRegistry); ok {
				out = append(out, reg)
			}
		}
		return out, nil
	}
	var regs v1beta1.ServiceRegistryList
	opts := []client.ListOption{client.InNamespace(ns), client.UnsafeDisableDeepCopy}
	if r.index != nil {
		opts = append(opts, client.MatchingFields{registryServiceField: service})
	}
	if err := r.List(ctx, &regs, opts...); err != nil {
		return nil, fmt.Errorf("list ServiceRegistries of service %s/%s: %w", ns, service, err)
	}
	out := make([]*v1beta1.ServiceRegistry, 0, len(regs.Items))
	for i := range regs.Items {
		if regs.Items[i].ResolvedServiceName() == service {
			out = append(out, &regs.Items[i])
		}
	}
	return out, nil
}
