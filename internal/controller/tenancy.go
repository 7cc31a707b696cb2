package controller

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/tenancy"
)

// Service name tenancy (issue 34; docs/security.md, "Tenancy"): a service name belongs to
// the namespace of its oldest ServiceRegistry, and a registry of another namespace publishes
// under it only when the owner shares it (spec.sharing.namespaces). The decision is
// internal/tenancy's; this file gathers the registries claiming a name, and maps a change of
// one of them to the others (bounded: the registries of one name).

// registryNameIndex is the registry informer's index by service name alone (every
// namespace), read by claimsOf.
const registryNameIndex = "registrar.dev/service"

func indexRegistryByName(obj any) ([]string, error) {
	reg, ok := obj.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil, nil
	}
	return []string{reg.ResolvedServiceName()}, nil
}

// claimOf is what the tenancy decision needs of a registry.
func claimOf(reg *v1beta1.ServiceRegistry) tenancy.Claim {
	c := tenancy.Claim{Namespace: reg.Namespace, Name: reg.Name, Created: reg.CreationTimestamp.Time,
		Deleting: reg.DeletionTimestamp != nil}
	if reg.Spec.Sharing != nil {
		c.SharedWith = reg.Spec.Sharing.Namespaces
	}
	return c
}

// claimsOf returns the ServiceRegistries of every namespace publishing a service name, as
// the cache's own objects (read-only): from the registry informer's index, else through the
// cache's field index (registryServiceField, which controller-runtime also indexes across
// namespaces), else by listing every registry.
func (r *ServiceRegistryReconciler) claimsOf(ctx context.Context, service string) ([]*v1beta1.ServiceRegistry, error) {
	if r.registries != nil {
		objs, err := r.registries.ByIndex(registryNameIndex, service)
		if err != nil {
			return nil, fmt.Errorf("ServiceRegistries of service %s from the index: %w", service, err)
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
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if r.index != nil {
		opts = append(opts, client.MatchingFields{registryServiceField: service})
	}
	if err := r.List(ctx, &regs, opts...); err != nil {
		return nil, fmt.Errorf("list ServiceRegistries of service %s: %w", service, err)
	}
	out := make([]*v1beta1.ServiceRegistry, 0, len(regs.Items))
	for i := range regs.Items {
		if regs.Items[i].ResolvedServiceName() == service {
			out = append(out, &regs.Items[i])
		}
	}
	return out, nil
}

// decideTenancy notes in the scope whether the registry may publish under its service
// name; a refused registry publishes nothing (eligibility.Facts.NameRefused) and reports
// why (regstatus.Input.Refused).
func (r *ServiceRegistryReconciler) decideTenancy(ctx context.Context, s *reconcileScope) error {
	if r.Tenancy == tenancy.ModeShared {
		return nil
	}
	regs, err := r.claimsOf(ctx, s.target.Service)
	if err != nil {
		return err
	}
	claims := make([]tenancy.Claim, len(regs))
	for i, o := range regs {
		claims[i] = claimOf(o)
	}
	d := tenancy.Decide(r.Tenancy, claimOf(s.reg), claims)
	if !d.Admitted {
		s.refused = tenancy.RefusalMessage(s.target.Service, d, s.reg.Namespace)
		log.FromContext(ctx).V(1).Info("service name owned by another namespace", "service", s.target.Service, "owner", d.Owner.Ref())
	}
	return nil
}

// registriesOfName maps a ServiceRegistry event to the registries of other namespaces with
// the same service name (called with the old and the new object of an update), so that a
// refused registry is admitted as soon as the owner shares the name or goes, and an admitted
// one refused as soon as the share is withdrawn. Registries of the same namespace are
// registriesOfService's.
func (r *ServiceRegistryReconciler) registriesOfName(ctx context.Context, obj client.Object) []reconcile.Request {
	changed, ok := obj.(*v1beta1.ServiceRegistry)
	if !ok || r.Tenancy == tenancy.ModeShared {
		return nil
	}
	regs, err := r.claimsOf(ctx, changed.ResolvedServiceName())
	if err != nil {
		log.FromContext(ctx).Error(err, "list ServiceRegistries of a service name", "service", changed.ResolvedServiceName())
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range regs {
		if o.Namespace != changed.Namespace {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}
