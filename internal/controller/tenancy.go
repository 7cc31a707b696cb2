package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/internal/tenancy"
)

// Service name tenancy (issue 34; docs/security.md, "Tenancy"): a service name belongs to
// the namespace of its oldest ServiceRegistry, and a registry of another namespace publishes
// under it only when the owner shares it (spec.sharing.namespaces). The decision is
// internal/tenancy's; this file gathers the registries claiming a name, and maps a change of
// one of them to the others (bounded: the registries of one name).

// decideTenancy notes in the scope whether the registry may publish under its service
// name; a refused registry publishes nothing (eligibility.Facts.NameRefused) and reports
// why (regstatus.Input.Refused).
func (r *ServiceRegistryReconciler) decideTenancy(ctx context.Context, s *reconcileScope) error {
	if r.Tenancy == tenancy.ModeShared {
		return nil
	}
	regs, err := r.cache.ClaimsOf(ctx, s.target.Service)
	if err != nil {
		return err
	}
	claims := make([]tenancy.Claim, len(regs))
	for i, o := range regs {
		claims[i] = tenancy.ClaimOf(o)
	}
	d := tenancy.Decide(r.Tenancy, tenancy.ClaimOf(s.reg), claims)
	if !d.Admitted {
		s.refused = tenancy.RefusalMessage(s.target.Service, d, s.reg.Namespace)
		log.FromContext(ctx).V(1).Info("service name owned by another namespace", "service", s.target.Service, "owner", d.Owner.Ref())
	}
	return nil
}
