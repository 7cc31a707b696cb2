// Package injector computes the changes the pod webhook makes to a pod selected by a
// ServiceRegistry with spec.injection.enabled. It is pure: no client, no clock, no I/O.
//
// A pod gets:
//   - the readiness gate registrar.dev/ready, which only registrar sets True (after warm-up
//     and after the store acknowledged the endpoint);
//   - on its serving containers, a native preStop sleep of spec.drain.seconds, so that it keeps
//     serving while callers' caches catch up with the deregistration (a container that already
//     has a preStop is left alone);
//   - a terminationGracePeriodSeconds raised by the drain, so that the shutdown after the drain
//     keeps the budget the pod had before;
//   - the annotation registrar.dev/injected: "<drain seconds>", which makes injection idempotent.
package injector

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

const (
	// DefaultTerminationGracePeriodSeconds is the API server's default for an unset
	// terminationGracePeriodSeconds.
	DefaultTerminationGracePeriodSeconds int64 = 30
)

// Result says what Inject changed, and what it deliberately left alone.
type Result struct {
	// Changed is true when the pod was modified.
	Changed bool
	// AlreadyInjected is true when the pod carried the registrar.dev/injected annotation and
	// was returned unchanged.
	AlreadyInjected bool
	// DrainSeconds is the drain that applies (spec.drain.seconds, or its default).
	DrainSeconds int32
	// GateAdded is true when the readiness gate was added.
	GateAdded bool
	// ServingContainers are the containers chosen to receive the preStop sleep.
	ServingContainers []string
	// PreStopAdded are the containers that received the preStop sleep.
	PreStopAdded []string
	// PreStopKept are serving containers that already had a preStop hook, left alone: the
	// drain does not apply to them unless their own hook waits long enough.
	PreStopKept []string
	// GracePeriodBefore is the pod's terminationGracePeriodSeconds before injection (nil
	// when unset, which the API server defaults to 30).
	GracePeriodBefore *int64
	// GracePeriodAfter is terminationGracePeriodSeconds after injection.
	GracePeriodAfter *int64
	// Changes lists every modification in words, in the order made.
	Changes []string
	// Notes lists what a person should know but that did not change the pod.
	Notes []string
}

// DrainSeconds returns the registry's drain length, applying the CRD default when spec.drain
// is nil (a ServiceRegistry read back from the API server always has the default applied;
// one built in code may not).
func DrainSeconds(reg *v1beta1.ServiceRegistry) int32 {
	if reg.Spec.Drain == nil || reg.Spec.Drain.Seconds == nil {
		return v1beta1.DefaultDrainSeconds
	}
	return *reg.Spec.Drain.Seconds
}

// Enabled reports whether the registry asks for injection.
func Enabled(reg *v1beta1.ServiceRegistry) bool {
	return reg.Spec.Injection != nil && ptr.Deref(reg.Spec.Injection.Enabled, false)
}

// Inject mutates pod in place for reg and returns what it did. It does not check that reg
// selects pod or has injection enabled; the caller does. A pod that already carries the
// registrar.dev/injected annotation is returned unchanged, so Inject(Inject(p)) == Inject(p).
func Inject(pod *corev1.Pod, reg *v1beta1.ServiceRegistry) Result {
	drain := DrainSeconds(reg)
	res := Result{DrainSeconds: drain, GracePeriodBefore: copyInt64(pod.Spec.TerminationGracePeriodSeconds)}
	res.GracePeriodAfter = res.GracePeriodBefore
	if v, ok := pod.Annotations[v1beta1.AnnotationInjected]; ok {
		res.AlreadyInjected = true
		res.Notes = append(res.Notes, fmt.Sprintf("pod already carries %s=%q; left unchanged", v1beta1.AnnotationInjected, v))
		return res
	}

	// Readiness gate.
	if !hasGate(pod) {
		pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: v1beta1.ReadinessGate})
		res.GateAdded = true
		res.Changes = append(res.Changes, fmt.Sprintf("added readiness gate %s", v1beta1.ReadinessGate))
	}

	// preStop sleep on the serving containers.
	serving, how := servingContainers(pod, reg)
	for _, i := range serving {
		res.ServingContainers = append(res.ServingContainers, pod.Spec.Containers[i].Name)
	}
	if how != "" {
		res.Notes = append(res.Notes, how)
	}
	if drain <= 0 {
		res.Notes = append(res.Notes, "drain.seconds is 0: no preStop sleep added")
	} else {
		for _, i := range serving {
			c := &pod.Spec.Containers[i]
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
				res.PreStopKept = append(res.PreStopKept, c.Name)
				res.Notes = append(res.Notes, fmt.Sprintf(
					"container %q already has a preStop hook; left it alone, so the %ds drain applies only if that hook waits as long",
					c.Name, drain))
				continue
			}
			if c.Lifecycle == nil {
				c.Lifecycle = &corev1.Lifecycle{}
			}
			c.Lifecycle.PreStop = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: int64(drain)}}
			res.PreStopAdded = append(res.PreStopAdded, c.Name)
			res.Changes = append(res.Changes, fmt.Sprintf("added preStop sleep of %ds to container %q", drain, c.Name))
		}
	}

	// Grace period: the drain sleep counts against terminationGracePeriodSeconds, so raise it
	// by the drain to keep the shutdown budget the pod had. Only when a sleep was added: with
	// no sleep (drain 0, or every serving container kept its own preStop) the budget is intact.
	if len(res.PreStopAdded) > 0 {
		prev := DefaultTerminationGracePeriodSeconds
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			prev = *pod.Spec.TerminationGracePeriodSeconds
		}
		want := prev + int64(drain)
		if pod.Spec.TerminationGracePeriodSeconds == nil || *pod.Spec.TerminationGracePeriodSeconds < want {
			pod.Spec.TerminationGracePeriodSeconds = &want
			res.GracePeriodAfter = copyInt64(&want)
			from := "unset (30s)"
			if res.GracePeriodBefore != nil {
				from = fmt.Sprintf("%ds", *res.GracePeriodBefore)
			}
			res.Changes = append(res.Changes, fmt.Sprintf("raised terminationGracePeriodSeconds from %s to %ds (drain %ds + previous budget)", from, want, drain))
		}
	}

	// The annotation marks the pod as done, whatever else happened.
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1beta1.AnnotationInjected] = strconv.Itoa(int(drain))
	res.Changes = append(res.Changes, fmt.Sprintf("set annotation %s=%q", v1beta1.AnnotationInjected, strconv.Itoa(int(drain))))
	res.Changed = true
	return res
}

func hasGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == v1beta1.ReadinessGate {
			return true
		}
	}
	return false
}

// servingContainers returns the indexes of the containers that serve the registry's ports:
// those declaring a port that matches spec.ports (by number for port, by name for
// targetPort); failing that, every container that declares any port; failing that, the first
// container. The second result explains a fallback, or is empty.
func servingContainers(pod *corev1.Pod, reg *v1beta1.ServiceRegistry) ([]int, string) {
	var matched, withPorts []int
	for i, c := range pod.Spec.Containers {
		if len(c.Ports) == 0 {
			continue
		}
		withPorts = append(withPorts, i)
		if containerServes(c, reg.Spec.Ports) {
			matched = append(matched, i)
		}
	}
	switch {
	case len(matched) > 0:
		return matched, ""
	case len(withPorts) > 0:
		return withPorts, "no container declares a port of spec.ports; using every container that declares a port"
	case len(pod.Spec.Containers) > 0:
		return []int{0}, fmt.Sprintf("no container declares a port; using the first container %q", pod.Spec.Containers[0].Name)
	default:
		return nil, "pod has no containers"
	}
}

func containerServes(c corev1.Container, ports []v1beta1.ServicePort) bool {
	for _, cp := range c.Ports {
		for _, sp := range ports {
			if sp.Port != 0 && cp.ContainerPort == sp.Port {
				return true
			}
			if sp.TargetPort != "" && cp.Name == sp.TargetPort {
				return true
			}
		}
	}
	return false
}

func copyInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
