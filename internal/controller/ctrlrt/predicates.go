package ctrlrt

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/echo"
)

// NotStatusOnly drops ServiceRegistry updates that change nothing but the status (the
// operator's own status writes, above all): which pods a registry manages, and which
// registries a registry competes with, do not depend on its status (eligibility.ClaimantOf).
// versions remembers the answer per update for the other handlers that ask it.
func NotStatusOnly(versions *echo.Statuses) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*v1beta1.ServiceRegistry)
		cur, okNew := e.ObjectNew.(*v1beta1.ServiceRegistry)
		return !okOld || !okNew || !versions.StatusOnly(old, cur)
	}}
}

// NotOwnStatusWrite drops the update events of a registry that only carry back the status
// this operator just wrote (echo.Statuses.IsEcho, over the status writer's versions): the
// reconcile that computed that status has nothing new to read in it. Every other update
// passes, a status written by anyone else too (the next reconcile corrects it).
func NotOwnStatusWrite(versions *echo.Statuses) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*v1beta1.ServiceRegistry)
		cur, okNew := e.ObjectNew.(*v1beta1.ServiceRegistry)
		return !okOld || !okNew || !versions.IsEcho(old, cur)
	}}
}
