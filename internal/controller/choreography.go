package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/eligibility"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/warmup"
)

// syncWarmups starts a warm-up for every pod of the scope that is warming up and cancels
// those whose pod no longer is. Warm-ups run in the background and never block a reconcile.
func (r *ServiceRegistryReconciler) syncWarmups(s *reconcileScope) {
	name := client.ObjectKeyFromObject(s.reg)
	jobs := map[types.UID]warmupJob{}
	for _, p := range s.selected {
		if p.verdict.State != v1alpha1.EndpointWarmingUp {
			continue
		}
		spec, err := warmupSpec(s.reg, p)
		if err != nil {
			continue // reported as NamedPortMissing by selectPods
		}
		regObj, podObj := s.reg, p.pod
		jobs[p.pod.UID] = warmupJob{
			registry: name, pod: client.ObjectKeyFromObject(p.pod), uid: p.pod.UID,
			newRun: func() func(ctx context.Context) bool { // copies only for a warm-up that starts
				reg, pod := regObj.DeepCopy(), podObj.DeepCopy()
				return func(ctx context.Context) bool { return r.warmUp(ctx, reg, pod, spec) }
			},
		}
	}
	r.warmups.sync(name, jobs)
}

// warmupSpec turns the registry's warmup into requests against the pod's IP and port.
func warmupSpec(reg *v1alpha1.ServiceRegistry, p selectedPod) (warmup.Spec, error) {
	w := reg.Spec.Warmup
	portName := w.Port
	if portName == "" && len(reg.Spec.Ports) > 0 {
		portName = reg.Spec.Ports[0].Name
	}
	port, ok := p.endpoint.Ports[portName]
	if !ok {
		return warmup.Spec{}, fmt.Errorf("warm-up port %q is not resolved for pod %s", portName, p.pod.Name)
	}
	host := net.JoinHostPort(p.pod.Status.PodIP, strconv.Itoa(int(port)))
	urls := make([]string, len(w.Paths))
	for i, path := range w.Paths {
		urls[i] = "http://" + host + path
	}
	return warmup.Spec{
		URLs: urls, Requests: int(max(w.Requests, 1)), Concurrency: int(max(w.Concurrency, 1)),
		RequestTimeout: durationOr(w.RequestTimeout, v1alpha1.DefaultWarmupRequestTimeout),
		Timeout:        durationOr(w.Timeout, v1alpha1.DefaultWarmupTimeout),
		MinDuration:    durationOr(w.MinDuration, 0),
	}, nil
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// warmUp runs one pod's warm-up and records the outcome on the pod's gate condition: the
// reason WarmedUp makes the pod eligible (also after an operator restart); WarmupFailed
// under onFailure=Block keeps it out of the store.
func (r *ServiceRegistryReconciler) warmUp(ctx context.Context, reg *v1alpha1.ServiceRegistry, pod *corev1.Pod, spec warmup.Spec) bool {
	res := r.Warmup.Run(ctx, spec)
	if ctx.Err() != nil {
		return false // the pod went away or stopped warming up
	}
	outcome := "succeeded"
	reason := v1alpha1.GateWarmedUp
	msg := fmt.Sprintf("warmed up with %d requests in %s", res.Succeeded, res.Elapsed.Round(time.Millisecond))
	if res.Err != nil {
		msg = fmt.Sprintf("warm-up failed after %s (%d succeeded, %d failed): %v", res.Elapsed.Round(time.Millisecond), res.Succeeded, res.Failed, res.Err)
		reason, outcome = v1alpha1.GateWarmupFailed, "failed"
		if reg.Spec.Warmup.OnFailure == v1alpha1.WarmupProceed {
			reason, outcome, msg = v1alpha1.GateWarmedUp, "proceeded", msg+"; onFailure=Proceed: registering anyway"
		}
		r.Recorder.Eventf(pod, reg, corev1.EventTypeWarning, v1alpha1.EventWarmupFailed, "WarmUp", "%s", msg)
	} else {
		r.Recorder.Eventf(pod, reg, corev1.EventTypeNormal, v1alpha1.EventWarmedUp, "WarmUp", "%s", msg)
	}
	metrics.WarmupDuration.WithLabelValues(outcome).Observe(res.Elapsed.Seconds())
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 8},
		func(ctx context.Context) (bool, error) {
			return r.setGate(ctx, pod, corev1.ConditionFalse, reason, msg, "") == nil, nil
		})
	if err != nil {
		log.FromContext(ctx).Error(err, "record warm-up outcome", "pod", client.ObjectKeyFromObject(pod))
		return false
	}
	return true
}

// flipGates writes the gate condition every gated pod of the scope should carry now. It runs
// after the store write, so a gate turns True only for an endpoint the store acknowledged.
func (r *ServiceRegistryReconciler) flipGates(ctx context.Context, s *reconcileScope) error {
	r.acks.set(s.reg.UID, s.stored)
	var claimants []eligibility.Claimant // read once, when a gate may turn True
	for _, p := range s.selected {
		rec, stored := s.stored[p.pod.Name]
		want, ok := eligibility.GateFor(p.pod, p.verdict, stored && rec.UID == string(p.pod.UID))
		if !ok {
			continue
		}
		msg := fmt.Sprintf("set by registrar: %s", want.Reason)
		if want.Status == corev1.ConditionTrue {
			if claimants == nil {
				var err error
				if claimants, err = namespaceClaimants(ctx, r.Client, s.reg.Namespace); err != nil {
					return err
				}
			}
			if waits := r.gateWaitsFor(s, p.pod, want, claimants); waits != "" {
				log.FromContext(ctx).V(1).Info("gate stays False: another registry selecting the pod is not done",
					"pod", p.pod.Name, "waitingFor", waits)
				continue
			}
			msg = fmt.Sprintf("endpoint %s is in the store (service %s)", rec.Address, s.target.Service)
		}
		err := r.setGate(ctx, p.pod, want.Status, want.Reason, msg, p.pod.ResourceVersion)
		if apierrors.IsConflict(err) {
			continue // decided on a stale pod; its newer version is on its way to a reconcile
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// gateWaitsFor names a registry selecting the pod (this one included) that the pod's gate
// still waits for before turning True, or "" (see eligibility.GateWaitsFor). This registry
// counts as holding the endpoint (its caller checked), the others by their last reconcile.
func (r *ServiceRegistryReconciler) gateWaitsFor(s *reconcileScope, pod *corev1.Pod, want eligibility.GateWant, claimants []eligibility.Claimant) string {
	holders := eligibility.GateHolders(labels.Set(pod.Labels), claimants)
	cur := ""
	if c := eligibility.GateCondition(pod); c != nil {
		cur = c.Reason
	}
	self := string(s.reg.UID)
	return eligibility.GateWaitsFor(want, cur, holders, func(uid string) bool {
		return uid == self || r.acks.has(types.UID(uid), pod.Name, pod.UID)
	})
}

// setGate patches the pod's registrar.dev/ready condition (pods/status, strategic merge on
// the condition type), guarded by the pod's UID so a recreated pod is never touched, and,
// when resourceVersion is set, by the version the decision was made on: a reconcile working
// from a stale cache then fails with a conflict instead of overwriting a newer outcome (a
// warm-up result written meanwhile).
func (r *ServiceRegistryReconciler) setGate(ctx context.Context, pod *corev1.Pod, status corev1.ConditionStatus, reason, msg, resourceVersion string) error {
	guard := map[string]any{"uid": pod.UID}
	if resourceVersion != "" {
		guard["resourceVersion"] = resourceVersion
	}
	patch := map[string]any{
		"metadata": guard,
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: v1alpha1.ReadinessGate, Status: status, Reason: reason, Message: msg,
			LastTransitionTime: metav1.NewTime(r.Clock.Now()),
		}}},
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode gate patch: %w", err)
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := r.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, raw)); err != nil {
		return fmt.Errorf("set %s=%s (%s) on pod %s/%s: %w", v1alpha1.ReadinessGate, status, reason, pod.Namespace, pod.Name, err)
	}
	return nil
}

// recordChanges emits an Event per registered and deregistered endpoint and measures the
// deregistration lag of pods whose trigger time Kubernetes recorded.
// endpointEvent reports whether the per-endpoint Event with this reason fits the budget at
// now, counting it as skipped when it does not.
func (r *ServiceRegistryReconciler) endpointEvent(now time.Time, reason string) bool {
	if r.EndpointEvents == nil || r.EndpointEvents.AllowN(now, 1) {
		return true
	}
	metrics.EndpointEventsSkipped.WithLabelValues(reason).Inc()
	return false
}

func (r *ServiceRegistryReconciler) recordChanges(s *reconcileScope, changes store.Changes) {
	now := r.Clock.Now()
	for _, ep := range changes.Create {
		if p, ok := s.byName[ep.Pod]; ok {
			if r.endpointEvent(now, v1alpha1.EventRegistered) {
				r.Recorder.Eventf(p.pod, s.reg, corev1.EventTypeNormal, v1alpha1.EventRegistered, "Register",
					"registered %s in service %s", ep.Address, s.target.Service)
			}
			if at, ok := readySince(p.pod); ok {
				metrics.RegistrationLag.Observe(now.Sub(at).Seconds())
			}
		}
	}
	for _, rec := range changes.Delete {
		p, ok := s.byName[rec.Pod]
		if !ok {
			if r.endpointEvent(now, v1alpha1.EventDeregistered) {
				r.Recorder.Eventf(s.reg, nil, corev1.EventTypeNormal, v1alpha1.EventDeregistered, "Deregister",
					"deregistered pod %s (%s): %s", rec.Pod, rec.Address, v1alpha1.ReasonPodDeleted)
			}
			continue
		}
		if r.endpointEvent(now, v1alpha1.EventDeregistered) {
			r.Recorder.Eventf(p.pod, s.reg, corev1.EventTypeNormal, v1alpha1.EventDeregistered, "Deregister",
				"deregistered %s from service %s: %s", rec.Address, s.target.Service, p.verdict.Reason)
		}
		if lag, ok := eligibility.DeregistrationLag(p.pod, p.verdict, now); ok {
			r.lags.add(s.reg.UID, lag)
			metrics.DeregistrationLag.Observe(lag.Seconds())
		}
	}
}

// readySince is the last transition of the pod's ContainersReady condition.
func readySince(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.ContainersReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// lagWindows keeps, per ServiceRegistry, the last deregistration lags measured for it: one
// registry's deregistrations never change another's drain advice.
type lagWindows struct {
	mu      sync.Mutex
	windows map[types.UID]*lagWindow
}

// lagWindow is one registry's last lagWindowSize lags.
type lagWindow struct {
	lags []time.Duration
	next int
}

const lagWindowSize = 128

func (w *lagWindows) add(registry types.UID, d time.Duration) {
	if d < 0 {
		d = 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.windows == nil {
		w.windows = map[types.UID]*lagWindow{}
	}
	win := w.windows[registry]
	if win == nil {
		win = &lagWindow{}
		w.windows[registry] = win
	}
	if len(win.lags) < lagWindowSize {
		win.lags = append(win.lags, d)
		return
	}
	win.lags[win.next] = d
	win.next = (win.next + 1) % lagWindowSize
}

// max is the slowest lag in the registry's window.
func (w *lagWindows) max(registry types.UID) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var m time.Duration
	if win := w.windows[registry]; win != nil {
		for _, d := range win.lags {
			m = max(m, d)
		}
	}
	return m
}

func (w *lagWindows) forget(registry types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.windows, registry)
}

// recordEndpointStates sets the registry's registrar_endpoints gauges: each selected pod by
// its state, an eligible pod counting as Registered only when the store holds it. Nothing
// is set while the store could not be read.
func recordEndpointStates(reg *v1alpha1.ServiceRegistry, pods []selectedPod, stored map[string]store.Record) {
	if stored == nil {
		return
	}
	counts := map[v1alpha1.EndpointState]int{}
	for _, p := range pods {
		st := p.verdict.State
		if rec, ok := stored[p.pod.Name]; p.verdict.Eligible() && (!ok || rec.UID != string(p.pod.UID)) {
			st = v1alpha1.EndpointPending
		}
		counts[st]++
	}
	for _, st := range []v1alpha1.EndpointState{v1alpha1.EndpointPending, v1alpha1.EndpointWarmingUp,
		v1alpha1.EndpointRegistered, v1alpha1.EndpointUnready, v1alpha1.EndpointDraining} {
		metrics.Endpoints.WithLabelValues(reg.Namespace, reg.Name, string(st)).Set(float64(counts[st]))
	}
}

// forgetEndpointStates drops the gauges of a registry that is gone.
func forgetEndpointStates(name types.NamespacedName) {
	metrics.Endpoints.DeletePartialMatch(map[string]string{"namespace": name.Namespace, "serviceregistry": name.Name})
	metrics.Unmutated.DeletePartialMatch(map[string]string{"namespace": name.Namespace, "serviceregistry": name.Name})
}
