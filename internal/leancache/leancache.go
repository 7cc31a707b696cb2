// Package leancache holds the informer-cache transforms that keep only what registrar reads
// of the objects it caches in bulk (issue 16, item 2). A cluster's pods are most of the
// operator's memory: a Deployment's pod carries managedFields, env, volumes, tolerations,
// container statuses and more, none of which registrar reads. The transforms build a new,
// small object from the few fields it does read; every other field is left out of the cache.
//
// What registrar reads of a Pod (audited with grep over internal/, cmd/ — eligibility,
// controller, gates, warm-ups, events, the gate releaser):
//
//   - metadata: name, namespace, uid, resourceVersion (gate patches' guard, Event
//     references), creationTimestamp (the gate releaser's grace), deletionTimestamp and
//     deletionGracePeriodSeconds (draining), labels (selectors), and the registrar.dev/
//     annotations (registrar.dev/injected: injection status); not ownerReferences (the
//     webhook reads them of the pod it admits, not of a cached one);
//   - spec: nodeName (endpoint node, zone, node Lease), readinessGates (the gate), and the
//     named ports (name, number) of the containers and of the native sidecars (init
//     containers with restartPolicy Always): a Service's named targetPort resolves to them;
//     a container without a named port is left out;
//   - status: phase, podIP, podIPs, two conditions: ContainersReady (status, reason, last
//     transition) and registrar's gate (whole), and of each container status its name,
//     restartCount and the running state's startedAt (a container restarted after the gate
//     opened is warmed up again: eligibility's ContainerRestarted).
//
// The strings every pod repeats (condition types, statuses and the kubelet's reason) are
// replaced by constants, and what many pods repeat (labels, named ports, namespace, node,
// registrar's annotations) is kept once for all of them (shared.go), so that each cached
// pod does not keep its own copy.
//
// Of a Deployment it reads the metadata (annotations configure a registry; name, uid,
// generation, creationTimestamp, ownerReferences) and spec.selector.
//
// Nothing writes an object read from the cache back whole (gate patches are built from
// scratch, registries are patched with merge patches), so a trimmed object never reaches
// the API server.
package leancache

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// AnnotationPrefix is the prefix of the pod annotations kept: registrar's own.
const AnnotationPrefix = "registrar.dev/"

// Pod returns the part of a pod registrar reads (see the package comment). The result
// shares maps and slices with pod, which must not be modified afterwards (an informer's
// freshly decoded object is not), and with other pods (shared.go).
func Pod(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: sharedString(pod.Namespace), UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Labels:                     sharedMap(pod.Labels),
			Annotations:                sharedMap(registrarAnnotations(pod.Annotations)),
		},
		Spec: corev1.PodSpec{
			NodeName:       sharedString(pod.Spec.NodeName),
			ReadinessGates: pod.Spec.ReadinessGates,
			Containers:     sharedContainerList(containerPorts(pod.Spec.Containers, false)),
			InitContainers: sharedContainerList(containerPorts(pod.Spec.InitContainers, true)),
		},
		Status: corev1.PodStatus{
			Phase: phase(pod.Status.Phase), PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs,
			Conditions:        conditions(pod.Status.Conditions),
			ContainerStatuses: restarts(pod.Status.ContainerStatuses),
		},
	}
	return out
}

// restarts keeps of each container status what the restart verdict reads: the name, the
// restart count and when the running instance started; nothing for containers that never
// restarted (the verdict ignores them).
func restarts(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for i := range cs {
		if cs[i].RestartCount == 0 {
			continue
		}
		c := corev1.ContainerStatus{Name: cs[i].Name, RestartCount: cs[i].RestartCount}
		if r := cs[i].State.Running; r != nil {
			c.State.Running = &corev1.ContainerStateRunning{StartedAt: r.StartedAt}
		}
		out = append(out, c)
	}
	return out
}

// containerPorts keeps the named ports (name and number) of each container that has one,
// with the container's name (and restartPolicy); of init containers, only the native
// sidecars (restartPolicy Always), the only ones whose ports a Service's targetPort
// resolves to. Order is kept: the first container declaring a name wins, as in Kubernetes.
func containerPorts(cs []corev1.Container, sidecarsOnly bool) []corev1.Container {
	var out []corev1.Container
	for i := range cs {
		c := &cs[i]
		if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
			continue
		}
		var ports []corev1.ContainerPort
		for _, p := range c.Ports {
			if p.Name != "" {
				ports = append(ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort})
			}
		}
		if len(ports) == 0 {
			continue
		}
		out = append(out, corev1.Container{Name: c.Name, Ports: ports, RestartPolicy: c.RestartPolicy})
	}
	return out
}

// conditions keeps ContainersReady (status, reason, last transition) and registrar's gate
// condition (whole), with constants for the strings every pod repeats.
func conditions(in []corev1.PodCondition) []corev1.PodCondition {
	n := 0
	for i := range in {
		if in[i].Type == corev1.ContainersReady || in[i].Type == v1beta1.ReadinessGate {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]corev1.PodCondition, 0, n)
	for i := range in {
		c := in[i]
		switch c.Type {
		case corev1.ContainersReady:
			out = append(out, corev1.PodCondition{Type: corev1.ContainersReady, Status: status(c.Status),
				Reason: constant(c.Reason, v1beta1.ReasonContainersNotReady), LastTransitionTime: c.LastTransitionTime})
		case v1beta1.ReadinessGate:
			c.Type, c.Status = v1beta1.ReadinessGate, status(c.Status)
			c.Reason = constant(c.Reason, v1beta1.GateRegistered, v1beta1.GateWarmingUp, v1beta1.GateWarmedUp,
				v1beta1.GateWarmupFailed, v1beta1.GateNotReady, v1beta1.GateReleased)
			out = append(out, c)
		}
	}
	return out
}

func phase(p corev1.PodPhase) corev1.PodPhase {
	for _, c := range [...]corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown} {
		if p == c {
			return c
		}
	}
	return p
}

func status(s corev1.ConditionStatus) corev1.ConditionStatus {
	switch s {
	case corev1.ConditionTrue:
		return corev1.ConditionTrue
	case corev1.ConditionFalse:
		return corev1.ConditionFalse
	case corev1.ConditionUnknown:
		return corev1.ConditionUnknown
	}
	return s
}

// constant returns the constant equal to s, if one is, else s.
func constant(s string, constants ...string) string {
	for _, c := range constants {
		if s == c {
			return c
		}
	}
	return s
}

func registrarAnnotations(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if strings.HasPrefix(k, AnnotationPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// Deployment returns the part of a Deployment registrar reads: its metadata without
// managedFields, and spec.selector.
func Deployment(d *appsv1.Deployment) *appsv1.Deployment {
	out := &appsv1.Deployment{TypeMeta: d.TypeMeta, ObjectMeta: d.ObjectMeta}
	out.ManagedFields = nil
	out.Spec.Selector = d.Spec.Selector
	return out
}

// TransformPod is Pod as an informer transform (cache.ByObject.Transform); objects other
// than pods pass unchanged.
func TransformPod(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return Pod(pod), nil
	}
	return obj, nil
}

// TransformDeployment is Deployment as an informer transform.
func TransformDeployment(obj any) (any, error) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		return Deployment(d), nil
	}
	return obj, nil
}
