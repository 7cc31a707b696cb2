package ctrlrt

import (
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/lazylog"
)

// RequestLogger is the logger builder.For gives a controller's reconciles: the controller,
// its group and kind, and the request's object. The request's pairs (and the reconcile ID
// controller-runtime adds) are deferred until a line is written (internal/lazylog): most
// reconciles write none, and zap encodes pairs as soon as they are given.
func RequestLogger(base logr.Logger, controllerName, kind string) func(*reconcile.Request) logr.Logger {
	log := lazylog.Wrap(base.WithValues("controller", controllerName, "controllerGroup", v1beta1.GroupVersion.Group, "controllerKind", kind))
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return log
		}
		return log.WithValues(kind, req.NamespacedName, "namespace", req.Namespace, "name", req.Name)
	}
}
