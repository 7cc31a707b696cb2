package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/warmup"
)

// The warm-up phase of a reconcile: it starts a background warm-up for every pod that is
// warming up, and a finished warm-up records its outcome on the pod's readiness gate.

// syncWarmups starts a warm-up for every pod of the scope that is warming up and cancels
// those whose pod no longer is. Warm-ups run in the background and never block a reconcile.
func (r *ServiceRegistryReconciler) syncWarmups(s *reconcileScope) {
	name := client.ObjectKeyFromObject(s.reg)
	jobs := map[types.UID]warmup.Job{}
	for _, p := range s.selected {
		if p.verdict.State != v1beta1.EndpointWarmingUp {
			continue
		}
		spec, err := warmup.SpecOf(s.reg, p.pod.Name, p.pod.Status.PodIP, p.endpoint.Ports)
		if err != nil {
			continue // reported as NamedPortMissing by selectPods
		}
		regObj, podObj := s.reg, p.pod
		jobs[p.pod.UID] = warmup.Job{
			Registry: name, Pod: client.ObjectKeyFromObject(p.pod), UID: p.pod.UID,
			NewRun: func() func(ctx context.Context) bool { // copies only for a warm-up that starts
				reg, pod := regObj.DeepCopy(), podObj.DeepCopy()
				return func(ctx context.Context) bool { return r.warmUp(ctx, reg, pod, spec) }
			},
		}
	}
	r.warmups.Sync(name, jobs)
}

// warmUp runs one pod's warm-up and records the outcome on the pod's gate condition: the
// reason WarmedUp makes the pod eligible (also after an operator restart); WarmupFailed
// under onFailure=Block keeps it out of the store.
func (r *ServiceRegistryReconciler) warmUp(ctx context.Context, reg *v1beta1.ServiceRegistry, pod *corev1.Pod, spec warmup.Spec) bool {
	res := r.Warmup.Run(ctx, spec)
	if ctx.Err() != nil {
		return false // the pod went away or stopped warming up
	}
	outcome := "succeeded"
	reason := v1beta1.GateWarmedUp
	msg := fmt.Sprintf("warmed up with %d requests in %s", res.Succeeded, res.Elapsed.Round(time.Millisecond))
	if res.Err != nil {
		msg = fmt.Sprintf("warm-up failed after %s (%d succeeded, %d failed): %v", res.Elapsed.Round(time.Millisecond), res.Succeeded, res.Failed, res.Err)
		reason, outcome = v1beta1.GateWarmupFailed, "failed"
		if reg.Spec.Warmup.OnFailure == v1beta1.WarmupProceed {
			reason, outcome, msg = v1beta1.GateWarmedUp, "proceeded", msg+"; onFailure=Proceed: registering anyway"
		}
		r.Recorder.Eventf(pod, reg, corev1.EventTypeWarning, v1beta1.EventWarmupFailed, "WarmUp", "%s", msg)
	} else {
		r.Recorder.Eventf(pod, reg, corev1.EventTypeNormal, v1beta1.EventWarmedUp, "WarmUp", "%s", msg)
	}
	metrics.WarmupDuration.WithLabelValues(outcome).Observe(res.Elapsed.Seconds())
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 8},
		func(ctx context.Context) (bool, error) {
			return r.gates.Set(ctx, pod, corev1.ConditionFalse, reason, msg, "") == nil, nil
		})
	if err != nil {
		log.FromContext(ctx).Error(err, "record warm-up outcome", "pod", client.ObjectKeyFromObject(pod))
		return false
	}
	return true
}
