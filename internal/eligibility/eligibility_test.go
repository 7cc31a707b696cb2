package eligibility

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store"
)

// podOpt mutates a test pod.
type podOpt func(*corev1.Pod)

// readyPod is a pod that passes every eligibility rule; opts break one rule at a time.
func readyPod(opts ...podOpt) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", UID: types.UID("pod-uid-0")},
		Spec: corev1.PodSpec{
			NodeName: "node-a",
			Containers: []corev1.Container{{
				Name:  "app",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			PodIP: "10.0.0.7",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
		},
	}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

func deleting(p *corev1.Pod) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func noIP(p *corev1.Pod) { p.Status.PodIP = "" }

// condition sets (or, with status "", removes) one pod condition.
func condition(t corev1.PodConditionType, status corev1.ConditionStatus) podOpt {
	return func(p *corev1.Pod) {
		out := p.Status.Conditions[:0:0]
		for _, c := range p.Status.Conditions {
			if c.Type != t {
				out = append(out, c)
			}
		}
		if status != "" {
			out = append(out, corev1.PodCondition{Type: t, Status: status})
		}
		p.Status.Conditions = out
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		pod    *corev1.Pod
		state  v1beta1.EndpointState
		reason string
	}{
		{
			name:  "eligible: running, IP, ContainersReady True",
			pod:   readyPod(),
			state: v1beta1.EndpointRegistered, reason: v1beta1.ReasonContainersReady,
		},
		{
			// The Ready condition waits on registrar's own readiness gate; only
			// ContainersReady decides eligibility.
			name:  "eligible even when Ready is False (readiness gate pending)",
			pod:   readyPod(condition(corev1.PodReady, corev1.ConditionFalse)),
			state: v1beta1.EndpointRegistered, reason: v1beta1.ReasonContainersReady,
		},
		{
			name:  "terminating and otherwise ready drains",
			pod:   readyPod(deleting),
			state: v1beta1.EndpointDraining, reason: v1beta1.ReasonPodTerminating,
		},
		{
			name:  "terminating wins over failed phase",
			pod:   readyPod(deleting, phase(corev1.PodFailed)),
			state: v1beta1.EndpointDraining, reason: v1beta1.ReasonPodTerminating,
		},
		{
			name:  "terminating wins over missing IP",
			pod:   readyPod(deleting, noIP),
			state: v1beta1.EndpointDraining, reason: v1beta1.ReasonPodTerminating,
		},
		{
			name:  "failed even with stale ContainersReady True",
			pod:   readyPod(phase(corev1.PodFailed)),
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonPodFailed,
		},
		{
			name:  "succeeded",
			pod:   readyPod(phase(corev1.PodSucceeded)),
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonPodSucceeded,
		},
		{
			name:  "unknown phase",
			pod:   readyPod(phase(corev1.PodUnknown)),
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonPodPhaseUnknown,
		},
		{
			name:  "pending phase",
			pod:   readyPod(phase(corev1.PodPending)),
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonPodNotRunning,
		},
		{
			name:  "empty phase (not yet reported) is pending",
			pod:   readyPod(phase("")),
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonPodNotRunning,
		},
		{
			name:  "pending phase without IP reports phase first",
			pod:   readyPod(phase(corev1.PodPending), noIP),
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonPodNotRunning,
		},
		{
			name:  "running without IP",
			pod:   readyPod(noIP),
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonNoPodIP,
		},
		{
			name:  "running without IP and not ready reports IP first",
			pod:   readyPod(noIP, condition(corev1.ContainersReady, corev1.ConditionFalse)),
			state: v1beta1.EndpointPending, reason: v1beta1.ReasonNoPodIP,
		},
		{
			name:  "ContainersReady False",
			pod:   readyPod(condition(corev1.ContainersReady, corev1.ConditionFalse)),
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonContainersNotReady,
		},
		{
			name:  "ContainersReady False even when Ready True",
			pod:   readyPod(condition(corev1.ContainersReady, corev1.ConditionFalse), condition(corev1.PodReady, corev1.ConditionTrue)),
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonContainersNotReady,
		},
		{
			name:  "ContainersReady Unknown",
			pod:   readyPod(condition(corev1.ContainersReady, corev1.ConditionUnknown)),
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonContainersNotReady,
		},
		{
			name:  "ContainersReady missing",
			pod:   readyPod(condition(corev1.ContainersReady, "")),
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonContainersNotReady,
		},
		{
			name:  "no conditions at all",
			pod:   readyPod(func(p *corev1.Pod) { p.Status.Conditions = nil }),
			state: v1beta1.EndpointUnready, reason: v1beta1.ReasonContainersNotReady,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pod.DeepCopy()
			got := Classify(tc.pod, false)
			want := Verdict{State: tc.state, Reason: tc.reason}
			if got != want {
				t.Errorf("Classify() = %+v, want %+v", got, want)
			}
			if wantEligible := tc.state == v1beta1.EndpointRegistered; got.Eligible() != wantEligible {
				t.Errorf("Eligible() = %v, want %v", got.Eligible(), wantEligible)
			}
			if !reflect.DeepEqual(before, tc.pod) {
				t.Errorf("Classify modified the pod")
			}
		})
	}
}

func TestVerdictEligible(t *testing.T) {
	for _, s := range []v1beta1.EndpointState{
		v1beta1.EndpointPending, v1beta1.EndpointWarmingUp, v1beta1.EndpointRegistered,
		v1beta1.EndpointUnready, v1beta1.EndpointDraining, "",
	} {
		if got, want := (Verdict{State: s}).Eligible(), s == v1beta1.EndpointRegistered; got != want {
			t.Errorf("Verdict{State: %q}.Eligible() = %v, want %v", s, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func registry(name, serviceName string, ports ...v1beta1.ServicePort) *v1beta1.ServiceRegistry {
	return &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("reg-uid-1")},
		Spec: v1beta1.ServiceRegistrySpec{
			ServiceName: serviceName,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ports:       ports,
		},
	}
}

func TestEndpoint(t *testing.T) {
	multiContainer := func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{
			{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			{Name: "sidecar", Ports: []corev1.ContainerPort{
				{Name: "admin", ContainerPort: 9901},
				{Name: "metrics", ContainerPort: 9090},
			}},
		}
	}
	base := store.Endpoint{
		Service:   "web",
		Namespace: "shop",
		Pod:       "web-0",
		UID:       "pod-uid-0",
		Address:   "10.0.0.7",
		Node:      "node-a",
		Zone:      "eu-west-1a",
		Cluster:   "prod-1",
		Owner:     "reg-uid-1",
	}
	with := func(mut func(*store.Endpoint)) store.Endpoint {
		e := base
		mut(&e)
		return e
	}
	at := Placement{Zone: "eu-west-1a", Cluster: "prod-1"}

	tests := []struct {
		name    string
		reg     *v1beta1.ServiceRegistry
		pod     *corev1.Pod
		at      Placement
		want    store.Endpoint
		wantErr []string // substrings the error must contain; nil means no error
	}{
		{
			name: "literal port",
			reg:  registry("web", "", v1beta1.ServicePort{Name: "http", Port: 80}),
			pod:  readyPod(),
			at:   at,
			want: with(func(e *store.Endpoint) { e.Ports = map[string]int32{"http": 80} }),
		},
		{
			name: "literal port wins even if a container port has the same name",
			reg:  registry("web", "", v1beta1.ServicePort{Name: "http", Port: 81}),
			pod:  readyPod(),
			at:   at,
			want: with(func(e *store.Endpoint) { e.Ports = map[string]int32{"http": 81} }),
		},
		{
			name: "targetPort resolved from the first container",
			reg:  registry("web", "", v1beta1.ServicePort{Name: "web", TargetPort: "http"}),
			pod:  readyPod(multiContainer),
			at:   at,
			want: with(func(e *store.Endpoint) { e.Ports = map[string]int32{"web": 8080} }),
		},
		{
			name: "targetPort resolved from a later container and a later port",
			reg:  registry("web", "", v1beta1.ServicePort{Name: "prom", TargetPort: "metrics"}),
			pod:  readyPod(multiContainer),
			at:   at,
			want: with(func(e *store.Endpoint) { e.Ports = map[string]int32{"prom": 9090} }),
		},
		{
			name: "mixed literal and named ports",
			reg: registry("web", "",
				v1beta1.ServicePort{Name: "http", TargetPort: "http"},
				v1beta1.ServicePort{Name: "admin", TargetPort: "admin"},
				v1beta1.ServicePort{Name: "grpc", Port: 9000},
			),
			pod: readyPod(multiContainer),
			at:  at,
			want: with(func(e *store.Endpoint) {
				e.Ports = map[string]int32{"http": 8080, "admin": 9901, "grpc": 9000}
			}),
		},
		{
			name: "no ports gives an empty port map",
			reg:  registry("web", ""),
			pod:  readyPod(),
			at:   at,
			want: with(func(e *store.Endpoint) { e.Ports = map[string]int32{} }),
		},
		{
			name:    "missing targetPort names the port and the target",
			reg:     registry("web", "", v1beta1.ServicePort{Name: "web", TargetPort: "https"}),
			pod:     readyPod(),
			at:      at,
			wantErr: []string{`"web"`, `"https"`, "web-0"},
		},
		{
			name: "missing targetPort after a resolvable one still fails",
			reg: registry("web", "",
				v1beta1.ServicePort{Name: "http", TargetPort: "http"},
				v1beta1.ServicePort{Name: "debug", TargetPort: "pprof"},
			),
			pod:     readyPod(multiContainer),
			at:      at,
			wantErr: []string{`"debug"`, `"pprof"`},
		},
		{
			name:    "targetPort is not matched against container names",
			reg:     registry("web", "", v1beta1.ServicePort{Name: "x", TargetPort: "sidecar"}),
			pod:     readyPod(multiContainer),
			at:      at,
			wantErr: []string{`"x"`, `"sidecar"`},
		},
		{
			name: "targetPort resolves from a native sidecar (init container, restartPolicy Always)",
			reg:  registry("web", "", v1beta1.ServicePort{Name: "proxy", TargetPort: "envoy"}),
			pod: readyPod(func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{
					Name: "envoy", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways),
					Ports: []corev1.ContainerPort{{Name: "envoy", ContainerPort: 15001}},
				}}
			}),
			at:   at,
			want: with(func(e *store.Endpoint) { e.Ports = map[string]int32{"proxy": 15001} }),
		},
		{
			name: "targetPort does not resolve from a plain init container",
			reg:  registry("web", "", v1beta1.ServicePort{Name: "setup", TargetPort: "setup"}),
			pod: readyPod(func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{
					Name: "init", Ports: []corev1.ContainerPort{{Name: "setup", ContainerPort: 7000}},
				}}
			}),
			at:      at,
			wantErr: []string{`"setup"`},
		},
		{
			name: "explicit serviceName is used",
			reg:  registry("web-registry", "storefront", v1beta1.ServicePort{Name: "http", Port: 80}),
			pod:  readyPod(),
			at:   at,
			want: with(func(e *store.Endpoint) {
				e.Service = "storefront"
				e.Ports = map[string]int32{"http": 80}
			}),
		},
		{
			name: "serviceName defaults to metadata.name",
			reg:  registry("checkout", "", v1beta1.ServicePort{Name: "http", Port: 80}),
			pod:  readyPod(),
			at:   at,
			want: with(func(e *store.Endpoint) {
				e.Service = "checkout"
				e.Ports = map[string]int32{"http": 80}
			}),
		},
		{
			name: "empty placement and unscheduled pod leave fields empty",
			reg:  registry("web", "", v1beta1.ServicePort{Name: "http", Port: 80}),
			pod:  readyPod(func(p *corev1.Pod) { p.Spec.NodeName = "" }),
			at:   Placement{},
			want: with(func(e *store.Endpoint) {
				e.Node, e.Zone, e.Cluster = "", "", ""
				e.Ports = map[string]int32{"http": 80}
			}),
		},
		{
			name: "namespace, pod, uid and address come from the pod",
			reg:  registry("web", "", v1beta1.ServicePort{Name: "http", Port: 80}),
			pod: readyPod(func(p *corev1.Pod) {
				p.Name, p.Namespace, p.UID = "web-9", "other-ns", "pod-uid-9"
				p.Status.PodIP = "fd00::9"
				p.Spec.NodeName = "node-z"
			}),
			at: Placement{Zone: "z2", Cluster: "c2"},
			want: with(func(e *store.Endpoint) {
				e.Namespace, e.Pod, e.UID, e.Address = "other-ns", "web-9", "pod-uid-9", "fd00::9"
				e.Node, e.Zone, e.Cluster = "node-z", "z2", "c2"
				e.Ports = map[string]int32{"http": 80}
			}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			regBefore, podBefore := tc.reg.DeepCopy(), tc.pod.DeepCopy()
			checkResolvePortsLike(t, tc.reg.Spec.Ports, tc.pod)
			got, err := Endpoint(tc.reg, tc.pod, tc.at)
			if !reflect.DeepEqual(regBefore, tc.reg) || !reflect.DeepEqual(podBefore, tc.pod) {
				t.Errorf("Endpoint modified its inputs")
			}
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Endpoint() = %+v, want an error", got)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %s", err, s)
					}
				}
				if !reflect.DeepEqual(got, store.Endpoint{}) {
					t.Errorf("Endpoint() returned %+v with an error, want the zero Endpoint", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Endpoint() error: %v", err)
			}
			if !got.RegisteredAt.IsZero() {
				t.Errorf("RegisteredAt = %v, want zero (Endpoint has no clock)", got.RegisteredAt)
			}
			if got.Ports == nil {
				t.Errorf("Ports is nil, want a non-nil map")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Endpoint() =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

// checkResolvePortsLike: whatever like holds, ResolvePortsLike answers as ResolvePorts, and
// returns like itself exactly when it holds the answer.
func checkResolvePortsLike(t *testing.T, specs []v1beta1.ServicePort, pod *corev1.Pod) {
	t.Helper()
	want, wantErr := ResolvePorts(specs, pod)
	extra := maps.Clone(want)
	if extra == nil {
		extra = map[string]int32{}
	}
	extra["extra"] = 1
	other := map[string]int32{}
	for k, v := range want {
		other[k] = v + 1
	}
	for name, like := range map[string]map[string]int32{
		"nil": nil, "the answer": maps.Clone(want), "other values": other, "an extra port": extra,
	} {
		got, err := ResolvePortsLike(specs, pod, like)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("ResolvePortsLike(like %s) error %v, want %v", name, err, wantErr)
		}
		if !maps.Equal(got, want) || (err == nil && got == nil) {
			t.Fatalf("ResolvePortsLike(like %s) = %v, want %v", name, got, want)
		}
		same := like != nil && got != nil && reflect.ValueOf(got).UnsafePointer() == reflect.ValueOf(like).UnsafePointer()
		if same != (like != nil && maps.Equal(like, want) && wantErr == nil) {
			t.Fatalf("ResolvePortsLike(like %s) returned like itself: %v", name, same)
		}
	}
}
