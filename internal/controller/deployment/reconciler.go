// Package deployment is the Deployment reconciler: an annotated Deployment (registrar.dev/service
// and friends, internal/annotations) gets a ServiceRegistry of the same name that it owns,
// kept equal to what its annotations say; a Deployment that loses the annotation loses its
// registry. A bad annotation is reported on the Deployment (a Warning Event) and on its
// registry (the config-error annotation), never by touching another service's registration.
package deployment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/annotations"
	"github.com/registrar-dev/registrar/internal/controller/ctrlrt"
)

// maxEventNote is the longest note the API server accepts on an events.k8s.io Event.
const maxEventNote = 1024

// Reconciler owns one ServiceRegistry for each Deployment annotated with
// registrar.dev/service: named after the Deployment, controlled by it, its spec generated
// from the Deployment's annotations (see package annotations). It never writes a registry's
// status, and never touches a ServiceRegistry that the Deployment does not control.
type Reconciler struct {
	client.Client
	// Recorder emits Events on Deployments.
	Recorder recorder.EventRecorder
	// Shards, when set (--sharding=lease), limits the controller to this replica's shards.
	Shards ctrlrt.Shards

	// warned remembers the last Warning per Deployment where no owned registry records it
	// (in its config-error annotation), so that a Deployment's status updates repeat none.
	warned warnings
}

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.registrar.dev,resources=serviceregistries,verbs=create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes the ServiceRegistry of one Deployment follow its annotations.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dep := &appsv1.Deployment{}
	if err := r.Get(ctx, req.NamespacedName, dep); err != nil {
		if apierrors.IsNotFound(err) {
			// Its registry goes with it: the garbage collector follows the ownerReference.
			r.warned.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get Deployment %s: %w", req, err)
	}
	if !dep.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes its registry
	}
	reg, err := r.registry(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := annotations.Spec(dep)
	owned := reg != nil && metav1.IsControlledBy(reg, dep)
	switch {
	case !res.Enabled:
		r.warned.forget(req.NamespacedName)
		if !owned {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.deleteRegistry(ctx, dep, reg)
	case reg != nil && !owned:
		r.warnOnce(dep, reg, v1beta1.EventRegistryConflict, fmt.Sprintf(
			"ServiceRegistry %s exists and is not controlled by this Deployment: %s is ignored until it is deleted",
			reg.Name, v1beta1.AnnotationService))
		return ctrl.Result{}, nil
	case reg != nil && !reg.DeletionTimestamp.IsZero():
		// Recreated once gone: the registry's deletion enqueues this Deployment again.
		return ctrl.Result{}, nil
	case !res.Usable && reg == nil:
		r.warnOnce(dep, nil, v1beta1.EventInvalidAnnotation, res.Message())
		return ctrl.Result{}, nil
	case !res.Usable:
		// Keep the last valid spec in force; only report the problems.
		return ctrl.Result{}, r.reportOnly(ctx, dep, reg, res.Message())
	case reg == nil:
		return ctrl.Result{}, r.createRegistry(ctx, dep, res)
	default:
		return ctrl.Result{}, r.updateRegistry(ctx, dep, reg, res)
	}
}

// registry returns the ServiceRegistry named like the Deployment, nil when there is none.
func (r *Reconciler) registry(ctx context.Context, name types.NamespacedName) (*v1beta1.ServiceRegistry, error) {
	reg := &v1beta1.ServiceRegistry{}
	if err := r.Get(ctx, name, reg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get ServiceRegistry %s: %w", name, err)
	}
	return reg, nil
}

func (r *Reconciler) createRegistry(ctx context.Context, dep *appsv1.Deployment, res annotations.Result) error {
	reg := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: dep.Name}}
	if err := r.render(dep, reg, res); err != nil {
		return err
	}
	if err := r.Create(ctx, reg); err != nil {
		// AlreadyExists (a cache that lags behind) is retried like any other error.
		return fmt.Errorf("create ServiceRegistry %s/%s for Deployment %s: %w", reg.Namespace, reg.Name, dep.Name, err)
	}
	r.warned.forget(client.ObjectKeyFromObject(dep))
	log.FromContext(ctx).Info("created ServiceRegistry", "serviceRegistry", reg.Name, "service", reg.Spec.ServiceName)
	r.Recorder.Eventf(dep, reg, corev1.EventTypeNormal, v1beta1.EventRegistryCreated, "Register",
		"created ServiceRegistry %s publishing service %s", reg.Name, reg.Spec.ServiceName)
	if msg := res.Message(); msg != "" {
		r.warn(dep, reg, v1beta1.EventInvalidAnnotation, msg)
	}
	return nil
}

func (r *Reconciler) updateRegistry(ctx context.Context, dep *appsv1.Deployment, reg *v1beta1.ServiceRegistry, res annotations.Result) error {
	want := reg.DeepCopy()
	if err := r.render(dep, want, res); err != nil {
		return err
	}
	r.warned.forget(client.ObjectKeyFromObject(dep))
	if equality.Semantic.DeepEqual(reg, want) {
		return nil
	}
	if err := r.Patch(ctx, want, client.MergeFromWithOptions(reg, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update ServiceRegistry %s/%s from Deployment %s: %w", reg.Namespace, reg.Name, dep.Name, err)
	}
	log.FromContext(ctx).Info("updated ServiceRegistry", "serviceRegistry", reg.Name, "service", want.Spec.ServiceName)
	if msg := res.Message(); msg != "" && msg != reg.Annotations[v1beta1.AnnotationConfigError] {
		r.warn(dep, want, v1beta1.EventInvalidAnnotation, msg)
	}
	return nil
}

// reportOnly records the problems on an owned registry whose spec cannot be updated.
func (r *Reconciler) reportOnly(ctx context.Context, dep *appsv1.Deployment, reg *v1beta1.ServiceRegistry, msg string) error {
	if reg.Annotations[v1beta1.AnnotationConfigError] == msg {
		return nil
	}
	want := reg.DeepCopy()
	setConfigError(want, msg)
	if err := r.Patch(ctx, want, client.MergeFrom(reg)); err != nil {
		return fmt.Errorf("annotate ServiceRegistry %s/%s with the problems of Deployment %s: %w", reg.Namespace, reg.Name, dep.Name, err)
	}
	r.warn(dep, want, v1beta1.EventInvalidAnnotation, msg)
	return nil
}

func (r *Reconciler) deleteRegistry(ctx context.Context, dep *appsv1.Deployment, reg *v1beta1.ServiceRegistry) error {
	if !reg.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.Delete(ctx, reg, client.Preconditions{UID: &reg.UID}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("delete ServiceRegistry %s/%s of Deployment %s: %w", reg.Namespace, reg.Name, dep.Name, err)
	}
	log.FromContext(ctx).Info("deleted ServiceRegistry: annotation removed", "serviceRegistry", reg.Name)
	r.Recorder.Eventf(dep, reg, corev1.EventTypeNormal, v1beta1.EventRegistryDeleted, "Unregister",
		"deleted ServiceRegistry %s: the Deployment no longer has %s", reg.Name, v1beta1.AnnotationService)
	return nil
}

// render sets what the Deployment decides on its registry: label, config-error annotation,
// controller reference and spec. Everything else (finalizers, status, other metadata) stays.
func (r *Reconciler) render(dep *appsv1.Deployment, reg *v1beta1.ServiceRegistry, res annotations.Result) error {
	// A Deployment name may be longer than a label value can be; the ownerReference is what
	// registrar relies on, the label is for people and selectors.
	if len(validation.IsValidLabelValue(dep.Name)) == 0 {
		if reg.Labels == nil {
			reg.Labels = map[string]string{}
		}
		reg.Labels[v1beta1.LabelDeployment] = dep.Name
	}
	setConfigError(reg, res.Message())
	// blockOwnerDeletion would require update on deployments/finalizers where the
	// OwnerReferencesPermissionEnforcement admission plugin runs; the registry's finalizer
	// already keeps it until its endpoints left the store.
	if err := controllerutil.SetControllerReference(dep, reg, r.Scheme(), controllerutil.WithBlockOwnerDeletion(false)); err != nil {
		return fmt.Errorf("set owner of ServiceRegistry %s/%s: %w", reg.Namespace, reg.Name, err)
	}
	reg.Spec = annotations.Defaulted(res.Spec)
	return nil
}

// setConfigError sets the config-error annotation to msg, or removes it when msg is empty.
func setConfigError(reg *v1beta1.ServiceRegistry, msg string) {
	if msg == "" {
		delete(reg.Annotations, v1beta1.AnnotationConfigError)
		if len(reg.Annotations) == 0 {
			reg.Annotations = nil
		}
		return
	}
	if reg.Annotations == nil {
		reg.Annotations = map[string]string{}
	}
	reg.Annotations[v1beta1.AnnotationConfigError] = msg
}

// warnOnce emits a Warning on the Deployment unless it is the one last emitted for it.
func (r *Reconciler) warnOnce(dep *appsv1.Deployment, related *v1beta1.ServiceRegistry, reason, msg string) {
	if r.warned.changed(client.ObjectKeyFromObject(dep), reason+"\x00"+msg) {
		r.warn(dep, related, reason, msg)
	}
}

func (r *Reconciler) warn(dep *appsv1.Deployment, related *v1beta1.ServiceRegistry, reason, msg string) {
	var rel runtime.Object // a nil *ServiceRegistry must not become a non-nil interface
	if related != nil {
		rel = related
	}
	r.Recorder.Eventf(dep, rel, corev1.EventTypeWarning, reason, "Configure", "%s", truncate(msg, maxEventNote))
}

// truncate shortens s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// warnings is the last Warning emitted per Deployment, where nothing else records it.
type warnings struct {
	mu   sync.Mutex
	last map[types.NamespacedName]string
}

// changed records msg as the last Warning of name and says whether it differs from before.
func (w *warnings) changed(name types.NamespacedName, msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[types.NamespacedName]string{}
	}
	if prev, ok := w.last[name]; ok && prev == msg {
		return false
	}
	w.last[name] = msg
	return true
}

func (w *warnings) forget(name types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, name)
}

// SetupWithManager registers the reconciler as controller "deployment". It watches the
// Deployments that have (or just lost) registrar.dev/service, and every ServiceRegistry,
// mapped to the Deployment of the same name: an owned registry that changes or disappears
// is put back, a hand-written one that is deleted makes way for the Deployment's, and at
// start-up a registry whose Deployment lost the annotation meanwhile is found and removed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&appsv1.Deployment{}, builder.WithPredicates(annotatedDeployment())).
		Watches(&v1beta1.ServiceRegistry{}, handler.EnqueueRequestsFromMapFunc(deploymentOfRegistry),
			builder.WithPredicates(registryChanged())).
		Named("deployment").
		WithOptions(ctrlrt.ShardedOptions(controller.Options{}, r.Shards, listAnnotatedDeployments(mgr.GetClient()))).
		Complete(ctrlrt.Sharded(r, r.Shards))
}

// deploymentOfRegistry maps a ServiceRegistry to the Deployment of the same name, the only
// one that can own it.
func deploymentOfRegistry(_ context.Context, reg client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(reg)}}
}

func hasServiceAnnotation(o client.Object) bool {
	_, ok := o.GetAnnotations()[v1beta1.AnnotationService]
	return ok
}

// annotatedDeployment passes Deployments that have registrar.dev/service, or had it before
// an update; of updates, only those that change what the registry is made of (annotations,
// spec) or the Deployment's deletion, not its status.
func annotatedDeployment() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return hasServiceAnnotation(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return hasServiceAnnotation(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return hasServiceAnnotation(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			if !hasServiceAnnotation(e.ObjectOld) && !hasServiceAnnotation(e.ObjectNew) {
				return false
			}
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				!maps.Equal(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()) ||
				!e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp())
		},
	}
}

// registryChanged passes the creation and deletion of ServiceRegistries, and updates of
// what the Deployment reconciler writes (spec, labels, annotations, owners), not status.
func registryChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() ||
				!maps.Equal(o.GetLabels(), n.GetLabels()) ||
				!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
				!slices.EqualFunc(o.GetOwnerReferences(), n.GetOwnerReferences(), func(a, b metav1.OwnerReference) bool {
					return equality.Semantic.DeepEqual(a, b)
				})
		},
	}
}

// listAnnotatedDeployments are requests for every Deployment with registrar.dev/service,
// and for the Deployment of every ServiceRegistry (one that lost the annotation while its
// shard had no owner).
func listAnnotatedDeployments(c client.Reader) func(ctx context.Context) ([]reconcile.Request, error) {
	return func(ctx context.Context) ([]reconcile.Request, error) {
		var deps appsv1.DeploymentList
		if err := c.List(ctx, &deps, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		var out []reconcile.Request
		for i := range deps.Items {
			if hasServiceAnnotation(&deps.Items[i]) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&deps.Items[i])})
			}
		}
		regs, err := ctrlrt.ListRegistries(c)(ctx)
		return append(out, regs...), err
	}
}
