// Package controller holds registrar's reconcilers. They stay thin: fetch, compute with the
// pure packages (eligibility, plan, regstatus), apply through the store interface, patch status.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/plan"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/regstatus"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/multi"
	"github.com/registrar-dev/registrar/internal/warmup"
)

// Finalizer keeps a ServiceRegistry until its endpoints have left the store.
const Finalizer = "registrar.dev/store-cleanup"

// ZoneLabel is the node label copied into each endpoint's zone field.
const ZoneLabel = corev1.LabelTopologyZone

// ServiceRegistryReconciler makes the store hold exactly the eligible pods of each
// ServiceRegistry, and reports what the store holds in the registry's status.
type ServiceRegistryReconciler struct {
	client.Client
	// Store is where endpoints are written.
	Store store.Store
	// StoreName describes the store in status messages (e.g. its endpoints).
	StoreName string
	// Recorder emits Events on registries.
	Recorder recorder.EventRecorder
	// Clock stamps registeredAt and status times; clock.RealClock{} in production.
	Clock clock.PassiveClock
	// Cluster is written into each endpoint's cluster field.
	Cluster string
	// Warmup sends warm-up requests to gated pods.
	Warmup *warmup.Runner
	// CallerCacheSeconds is the callers' cache TTL assumed when spec.drain.callerCacheSeconds
	// is unset; it feeds the drain advice.
	CallerCacheSeconds int32
	// NodeLeaseTimeout caps how long after its node's last Lease renewal a pod stays
	// registered (the Lease's own duration applies when shorter); 0 ignores node Leases.
	NodeLeaseTimeout time.Duration
	// EndpointEvents is the operator-wide budget of the per-endpoint Registered and
	// Deregistered Events (one API write each): those beyond it are skipped and counted in
	// registrar_endpoint_events_skipped_total. Nil emits every one.
	EndpointEvents *rate.Limiter
	// Publisher, when set, follows every reconcile's verdicts besides the store (the xDS
	// server); nil publishes nowhere else.
	Publisher publish.Publisher

	known   *knownRecords
	warmups *warmupTracker
	status  *statusWriter
	lags    lagWindow
}

// +kubebuilder:rbac:groups=discovery.registrar.dev,resources=serviceregistries,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=discovery.registrar.dev,resources=serviceregistries/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=discovery.registrar.dev,resources=serviceregistries/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// selectedPod is one pod the registry selects, with the reconcile's verdict on it.
type selectedPod struct {
	pod     *corev1.Pod
	verdict eligibility.Verdict
	// endpoint is the store value for an eligible or warming pod (its ports serve warm-up).
	endpoint store.Endpoint
}

// reconcileScope is what one reconcile of one ServiceRegistry gathers and decides.
type reconcileScope struct {
	reg      *v1alpha1.ServiceRegistry
	original *v1alpha1.ServiceRegistry
	target   store.Scope
	selected []selectedPod
	byName   map[string]selectedPod
	desired  map[string]store.Endpoint
	stored   map[string]store.Record // this registry's own records
	plan     plan.Plan
	selErr   error
	storeErr error
	// overlaps are pods an older registry of the same service also selects: pod → its name.
	overlaps map[string]string
	// leaseCheck is the earliest time a node Lease of a registered pod lapses, if renewed
	// no more: the reconcile comes back then, as nothing else would trigger it.
	leaseCheck time.Time
}

// Reconcile syncs one ServiceRegistry.
func (r *ServiceRegistryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	reg := &v1alpha1.ServiceRegistry{}
	if err := r.Get(ctx, req.NamespacedName, reg); err != nil {
		if apierrors.IsNotFound(err) {
			r.known.forget(req.NamespacedName)
			r.warmups.sync(req.NamespacedName, nil)
			r.status.forget(req.NamespacedName)
			forgetEndpointStates(req.NamespacedName)
			r.unpublish(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get ServiceRegistry %s: %w", req, err)
	}
	if !reg.DeletionTimestamp.IsZero() {
		r.useNewestStatus(reg)
		return ctrl.Result{}, r.finalize(ctx, reg)
	}
	if err := r.ensureFinalizer(ctx, reg); err != nil {
		return ctrl.Result{}, err
	}
	r.useNewestStatus(reg) // after the finalizer patch, which returns the server's status
	s := &reconcileScope{reg: reg, original: reg.DeepCopy(), target: scopeOf(reg)}
	if err := r.selectPods(ctx, s); err != nil {
		return ctrl.Result{}, err // nothing observed: leave status as it is
	}
	defer func() {
		if !errors.Is(s.storeErr, store.ErrFenced) { // a deposed leader leaves status to the new one
			r.submitStatus(s)
		}
	}()
	if s.selErr != nil {
		return ctrl.Result{}, nil // reported in status; a spec change brings it back
	}
	r.syncWarmups(s)
	if err := r.retireOldScope(ctx, s); err != nil {
		s.storeErr = err
		return ctrl.Result{}, err
	}
	if s.storeErr = r.sync(ctx, s); s.storeErr != nil {
		return ctrl.Result{}, s.storeErr
	}
	return conflictRequeue(s, r.leaseRequeue(s)), r.flipGates(ctx, s)
}

func scopeOf(reg *v1alpha1.ServiceRegistry) store.Scope {
	return store.Scope{Service: reg.ResolvedServiceName(), Namespace: reg.Namespace, Stores: storesOf(reg), TTL: dnsTTL(reg)}
}

func (r *ServiceRegistryReconciler) ensureFinalizer(ctx context.Context, reg *v1alpha1.ServiceRegistry) error {
	if controllerutil.ContainsFinalizer(reg, Finalizer) {
		return nil
	}
	patch := client.MergeFrom(reg.DeepCopy())
	controllerutil.AddFinalizer(reg, Finalizer)
	if err := r.Patch(ctx, reg, patch); err != nil {
		return fmt.Errorf("add finalizer to %s/%s: %w", reg.Namespace, reg.Name, err)
	}
	return nil
}

// selectPods lists the registry's pods from the cache and classifies them.
func (r *ServiceRegistryReconciler) selectPods(ctx context.Context, s *reconcileScope) error {
	sel, err := metav1.LabelSelectorAsSelector(&s.reg.Spec.Selector)
	if err != nil || sel.Empty() {
		s.selErr = errors.Join(err, errEmptySelector(sel))
		return nil
	}
	older, err := r.olderClaims(ctx, s.reg)
	if err != nil {
		return err
	}
	// Read-only: the pods are classified and referenced, never modified (a warm-up copies
	// its pod when it starts), so the cache's objects are listed without deep copies, the
	// largest CPU item of the 5,000-pod benchmark.
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(s.reg.Namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list pods of %s/%s: %w", s.reg.Namespace, s.reg.Name, err)
	}
	s.desired = make(map[string]store.Endpoint, len(pods.Items))
	s.byName = make(map[string]selectedPod, len(pods.Items))
	for i := range pods.Items {
		p := r.classify(ctx, s.reg, &pods.Items[i])
		r.checkNodeLease(ctx, s, &p)
		yieldToOlder(s, &p, older)
		if p.verdict.Eligible() {
			s.desired[p.pod.Name] = p.endpoint
		}
		s.selected = append(s.selected, p)
		s.byName[p.pod.Name] = p
	}
	return nil
}

// classify gives a pod its verdict; a pod whose ports cannot be resolved is held back.
func (r *ServiceRegistryReconciler) classify(ctx context.Context, reg *v1alpha1.ServiceRegistry, pod *corev1.Pod) selectedPod {
	p := selectedPod{pod: pod, verdict: eligibility.Classify(pod, reg.Spec.Warmup != nil)}
	if p.verdict.State != v1alpha1.EndpointRegistered && p.verdict.State != v1alpha1.EndpointWarmingUp {
		return p
	}
	ep, err := eligibility.Endpoint(reg, pod, eligibility.Placement{Zone: r.zoneOf(ctx, pod), Cluster: r.Cluster})
	if err != nil {
		log.FromContext(ctx).Info("pod not registered", "pod", pod.Name, "reason", err.Error())
		p.verdict = eligibility.Verdict{State: v1alpha1.EndpointPending, Reason: eligibility.ReasonPortMissing}
		return p
	}
	p.endpoint = ep
	return p
}

func errEmptySelector(sel labels.Selector) error {
	if sel != nil && sel.Empty() {
		return errors.New("selector matches every pod")
	}
	return nil
}

// zoneOf reads the zone label of the pod's node; empty when unknown.
func (r *ServiceRegistryReconciler) zoneOf(ctx context.Context, pod *corev1.Pod) string {
	if pod.Spec.NodeName == "" {
		return ""
	}
	var node corev1.Node
	if err := r.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, &node); err != nil {
		return ""
	}
	return node.Labels[ZoneLabel]
}

// sync makes the registry's records in the store equal to s.desired.
func (r *ServiceRegistryReconciler) sync(ctx context.Context, s *reconcileScope) error {
	name := client.ObjectKeyFromObject(s.reg)
	current, err := r.current(ctx, name, s.reg.UID, s.target)
	if err != nil {
		return err
	}
	owner := string(s.reg.UID)
	s.plan = plan.Compute(owner, s.desired, current, r.Clock.Now())
	if len(s.plan.Conflicts) > 0 {
		// The other owner may have released its keys since they were read: read them again.
		r.known.forget(name)
		if current, err = r.current(ctx, name, s.reg.UID, s.target); err != nil {
			return err
		}
		s.plan = plan.Compute(owner, s.desired, current, r.Clock.Now())
	}
	s.stored = plan.Owned(owner, current)
	if s.plan.Changes.Len() == 0 {
		return nil
	}
	written, err := r.Store.Apply(ctx, s.target, s.plan.Changes)
	if err != nil {
		r.known.forget(name) // outcome unknown: list again before the next write
		return fmt.Errorf("apply %d changes to service %s/%s: %w", s.plan.Changes.Len(), s.target.Service, s.target.Namespace, err)
	}
	r.recordChanges(s, s.plan.Changes)
	current = applied(current, s.plan.Changes, written)
	r.known.set(name, s.reg.UID, s.target, current)
	s.stored = plan.Owned(owner, current)
	log.FromContext(ctx).V(1).Info("store updated", "service", s.target.Service,
		"created", len(s.plan.Changes.Create), "updated", len(s.plan.Changes.Update), "deleted", len(s.plan.Changes.Delete))
	return nil
}

// current returns every record in scope: from memory when known, else listed from the store.
func (r *ServiceRegistryReconciler) current(ctx context.Context, name types.NamespacedName, uid types.UID, target store.Scope) (map[string]store.Record, error) {
	if records, ok := r.known.get(name, uid, target); ok {
		return records, nil
	}
	listed, err := r.Store.List(ctx, target)
	if err != nil {
		return nil, err
	}
	records := byPod(listed)
	r.known.set(name, uid, target, records)
	copied, _ := r.known.get(name, uid, target)
	return copied, nil
}

// retireOldScope removes the registry's records under the service name it used before
// (status.serviceName), after spec.serviceName changed.
func (r *ServiceRegistryReconciler) retireOldScope(ctx context.Context, s *reconcileScope) error {
	old := s.reg.Status.ServiceName
	if old == "" || old == s.target.Service {
		return nil
	}
	return r.removeOwned(ctx, s.reg, store.Scope{Service: old, Namespace: s.reg.Namespace, Stores: storesOf(s.reg)})
}

// removeOwned deletes every record of reg in scope.
func (r *ServiceRegistryReconciler) removeOwned(ctx context.Context, reg *v1alpha1.ServiceRegistry, target store.Scope) error {
	listed, err := r.Store.List(ctx, target)
	if err != nil && !errors.Is(err, multi.ErrNotConfigured) { // an unconfigured store holds nothing to remove
		return err
	}
	p := plan.Compute(string(reg.UID), nil, byPod(listed), r.Clock.Now())
	if p.Changes.Len() == 0 {
		return nil
	}
	if _, err := r.Store.Apply(ctx, target, p.Changes); err != nil {
		return fmt.Errorf("remove %d endpoints of service %s/%s: %w", p.Changes.Len(), target.Service, target.Namespace, err)
	}
	return nil
}

// finalize removes the registry's endpoints from the store, then its finalizer.
func (r *ServiceRegistryReconciler) finalize(ctx context.Context, reg *v1alpha1.ServiceRegistry) error {
	if !controllerutil.ContainsFinalizer(reg, Finalizer) {
		return nil
	}
	name := client.ObjectKeyFromObject(reg)
	r.unpublish(name)
	r.known.forget(name)
	r.warmups.sync(name, nil)
	scopes := []store.Scope{scopeOf(reg)}
	if old := reg.Status.ServiceName; old != "" && old != scopes[0].Service {
		scopes = append(scopes, store.Scope{Service: old, Namespace: reg.Namespace, Stores: storesOf(reg)})
	}
	for _, target := range scopes {
		if err := r.removeOwned(ctx, reg, target); err != nil {
			r.Recorder.Eventf(reg, nil, corev1.EventTypeWarning, regstatus.ReasonStoreUnreachable, "Cleanup",
				"cannot remove endpoints from the store; deletion waits until it is reachable: %v", err)
			return err
		}
	}
	patch := client.MergeFrom(reg.DeepCopy())
	controllerutil.RemoveFinalizer(reg, Finalizer)
	if err := r.Patch(ctx, reg, patch); err != nil {
		return fmt.Errorf("remove finalizer from %s: %w", name, err)
	}
	return nil
}

// useNewestStatus replaces the cached status with the newest one this operator computed,
// which the cache may not show yet (the status writer writes it asynchronously). Call it
// once per reconcile, on the status as read: it compares that with the newest one.
func (r *ServiceRegistryReconciler) useNewestStatus(reg *v1alpha1.ServiceRegistry) {
	if st, ok := r.status.base(client.ObjectKeyFromObject(reg), reg.UID, reg.Status); ok {
		reg.Status = st
	}
}

// submitStatus computes the status from the scope and, when it changed, emits an Event for
// every condition that changed status or reason and hands the status to the status writer,
// which writes it off the reconcile path.
func (r *ServiceRegistryReconciler) submitStatus(s *reconcileScope) {
	s.reg.Status = regstatus.Build(s.original.Status, regstatus.Input{
		Generation:  s.reg.Generation,
		ServiceName: s.target.Service,
		Pods:        r.statusPods(s),
		Stored:      s.stored,
		Conflicts:   s.plan.Conflicts,
		Overlaps:    s.overlaps,
		SelectorErr: s.selErr,
		StoreErr:    s.storeErr,
		StoreName:   r.StoreName,
		Drain:       r.drainInput(s.reg),
		Config: regstatus.Configuration{
			Generated: s.reg.Labels[v1alpha1.LabelDeployment] != "",
			Problems:  s.reg.Annotations[v1alpha1.AnnotationConfigError],
		},
		Now: r.Clock.Now(),
	})
	s.reg.Status.Stores = r.storeStatuses(s)
	r.publish(s)
	recordEndpointStates(s.reg, s.selected, s.stored)
	if equality.Semantic.DeepEqual(s.original.Status, s.reg.Status) {
		return
	}
	r.emitConditionEvents(s)
	r.status.submit(client.ObjectKeyFromObject(s.reg), s.reg.UID, s.reg.Status)
}

func (r *ServiceRegistryReconciler) statusPods(s *reconcileScope) []regstatus.Pod {
	pods := make([]regstatus.Pod, len(s.selected))
	drain := drainSeconds(s.reg)
	for i, p := range s.selected {
		pods[i] = regstatus.Pod{Name: p.pod.Name, UID: string(p.pod.UID), IP: p.pod.Status.PodIP,
			Verdict: p.verdict, DrainUntil: eligibility.DrainUntil(p.pod, drain)}
	}
	return pods
}

func (r *ServiceRegistryReconciler) drainInput(reg *v1alpha1.ServiceRegistry) regstatus.Drain {
	d := regstatus.Drain{Seconds: drainSeconds(reg), CallerCacheSeconds: r.CallerCacheSeconds, DeregistrationLag: r.lags.max()}
	if reg.Spec.Drain != nil && reg.Spec.Drain.CallerCacheSeconds != nil {
		d.CallerCacheSeconds = *reg.Spec.Drain.CallerCacheSeconds
	}
	return d
}

// DefaultDrainSeconds is spec.drain.seconds when spec.drain is unset (the CRD default).
const DefaultDrainSeconds = 15

func drainSeconds(reg *v1alpha1.ServiceRegistry) int32 {
	if reg.Spec.Drain == nil {
		return DefaultDrainSeconds
	}
	return reg.Spec.Drain.Seconds
}

func (r *ServiceRegistryReconciler) emitConditionEvents(s *reconcileScope) {
	for _, c := range s.reg.Status.Conditions {
		var was *metav1.Condition
		for i := range s.original.Status.Conditions {
			if s.original.Status.Conditions[i].Type == c.Type {
				was = &s.original.Status.Conditions[i]
			}
		}
		if (was != nil && was.Status == c.Status && was.Reason == c.Reason) || c.Type == v1alpha1.ConditionReconciling {
			continue // Reconciling comes and goes with every rollout: no Event
		}
		typ := corev1.EventTypeNormal
		if c.Status != metav1.ConditionTrue || c.Type == v1alpha1.ConditionStalled {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(s.reg, nil, typ, c.Reason, "Reconcile", "%s: %s", c.Type, c.Message)
	}
}
