package injector

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

func registry(drain *int32, ports ...v1beta1.ServicePort) *v1beta1.ServiceRegistry {
	r := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "orders"}},
			Ports:     ports,
			Injection: &v1beta1.InjectionSpec{Enabled: ptr.To(true)},
		},
	}
	if drain != nil {
		r.Spec.Drain = &v1beta1.DrainSpec{Seconds: ptr.To(*drain)}
	}
	return r
}

func port(name string, n int32) v1beta1.ServicePort {
	return v1beta1.ServicePort{Name: name, Port: n}
}

func target(name, target string) v1beta1.ServicePort {
	return v1beta1.ServicePort{Name: name, TargetPort: target}
}

func container(name string, ports ...corev1.ContainerPort) corev1.Container {
	return corev1.Container{Name: name, Image: "img", Ports: ports}
}

func cport(name string, n int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: n}
}

func pod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "orders-", Labels: map[string]string{"app": "orders"}},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

func sleepOf(c corev1.Container) int64 {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		return -1
	}
	return c.Lifecycle.PreStop.Sleep.Seconds
}

func gates(p *corev1.Pod) int {
	n := 0
	for _, g := range p.Spec.ReadinessGates {
		if g.ConditionType == v1beta1.ReadinessGate {
			n++
		}
	}
	return n
}

func execPreStop() *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"nginx", "-s", "quit"}}}}
}

func TestInject(t *testing.T) {
	type want struct {
		changed    bool
		gates      int
		sleeps     map[string]int64 // container → preStop sleep seconds (-1: none)
		kept       []string
		grace      *int64
		annotation string // "" means absent
	}
	tests := []struct {
		name string
		reg  *v1beta1.ServiceRegistry
		pod  func() *corev1.Pod
		want want
	}{
		{
			name: "defaults: drain nil means 15s, grace unset (30) becomes 45",
			reg:  registry(nil, port("http", 8080)),
			pod:  func() *corev1.Pod { return pod(container("app", cport("http", 8080))) },
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"app": 15}, grace: ptr.To[int64](45), annotation: "15"},
		},
		{
			name: "explicit grace is raised by the drain",
			reg:  registry(ptr.To[int32](20), port("http", 8080)),
			pod: func() *corev1.Pod {
				p := pod(container("app", cport("http", 8080)))
				p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
				return p
			},
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"app": 20}, grace: ptr.To[int64](80), annotation: "20"},
		},
		{
			name: "explicit grace of 0 becomes the drain (never below the sleep)",
			reg:  registry(ptr.To[int32](10), port("http", 8080)),
			pod: func() *corev1.Pod {
				p := pod(container("app", cport("http", 8080)))
				p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
				return p
			},
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"app": 10}, grace: ptr.To[int64](10), annotation: "10"},
		},
		{
			name: "gate already present is not added twice",
			reg:  registry(nil, port("http", 8080)),
			pod: func() *corev1.Pod {
				p := pod(container("app", cport("http", 8080)))
				p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "other/gate"}, {ConditionType: v1beta1.ReadinessGate}}
				return p
			},
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"app": 15}, grace: ptr.To[int64](45), annotation: "15"},
		},
		{
			name: "preStop only on the container serving spec.ports (by number)",
			reg:  registry(ptr.To[int32](15), port("http", 8080)),
			pod: func() *corev1.Pod {
				return pod(container("sidecar", cport("admin", 15000)), container("app", cport("web", 8080)), container("logger"))
			},
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"sidecar": -1, "app": 15, "logger": -1}, grace: ptr.To[int64](45), annotation: "15"},
		},
		{
			name: "preStop only on the container serving spec.ports (by targetPort name)",
			reg:  registry(ptr.To[int32](15), target("grpc", "grpc")),
			pod: func() *corev1.Pod {
				return pod(container("app", cport("http", 8080)), container("rpc", cport("grpc", 9090)))
			},
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"app": -1, "rpc": 15}, grace: ptr.To[int64](45), annotation: "15"},
		},
		{
			name: "no port matches: every container that declares a port",
			reg:  registry(ptr.To[int32](5), port("http", 80)),
			pod: func() *corev1.Pod {
				return pod(container("a", cport("x", 1000)), container("b"), container("c", cport("y", 2000)))
			},
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"a": 5, "b": -1, "c": 5}, grace: ptr.To[int64](35), annotation: "5"},
		},
		{
			name: "no container declares a port: the first container",
			reg:  registry(ptr.To[int32](5)),
			pod:  func() *corev1.Pod { return pod(container("a"), container("b")) },
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"a": 5, "b": -1}, grace: ptr.To[int64](35), annotation: "5"},
		},
		{
			name: "existing preStop is left alone and noted; grace unchanged when no sleep was added",
			reg:  registry(ptr.To[int32](15), port("http", 8080)),
			pod: func() *corev1.Pod {
				c := container("app", cport("http", 8080))
				c.Lifecycle = execPreStop()
				return pod(c)
			},
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"app": -1}, kept: []string{"app"}, grace: nil, annotation: "15"},
		},
		{
			name: "existing preStop on one of two serving containers: the other gets the sleep",
			reg:  registry(ptr.To[int32](15), port("http", 8080), port("admin", 9000)),
			pod: func() *corev1.Pod {
				a := container("app", cport("http", 8080))
				a.Lifecycle = execPreStop()
				b := container("admin", cport("admin", 9000))
				b.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}}
				return pod(a, b)
			},
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"app": -1, "admin": 15}, kept: []string{"app"}, grace: ptr.To[int64](45), annotation: "15"},
		},
		{
			name: "drain 0: gate and annotation, no preStop, grace untouched",
			reg:  registry(ptr.To[int32](0), port("http", 8080)),
			pod:  func() *corev1.Pod { return pod(container("app", cport("http", 8080))) },
			want: want{changed: true, gates: 1, sleeps: map[string]int64{"app": -1}, grace: nil, annotation: "0"},
		},
		{
			name: "annotated pod is returned unchanged",
			reg:  registry(ptr.To[int32](15), port("http", 8080)),
			pod: func() *corev1.Pod {
				p := pod(container("app", cport("http", 8080)))
				p.Annotations = map[string]string{v1beta1.AnnotationInjected: "7"}
				return p
			},
			want: want{changed: false, gates: 0, sleeps: map[string]int64{"app": -1}, grace: nil, annotation: "7"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.pod()
			before := p.DeepCopy()
			res := Inject(p, tt.reg)
			if res.Changed != tt.want.changed {
				t.Errorf("Changed = %v, want %v (result %+v)", res.Changed, tt.want.changed, res)
			}
			if !res.Changed && !equality.Semantic.DeepEqual(before, p) {
				t.Errorf("Changed=false but the pod was modified")
			}
			if g := gates(p); g != tt.want.gates {
				t.Errorf("readiness gates = %d, want %d", g, tt.want.gates)
			}
			for _, c := range p.Spec.Containers {
				if w, ok := tt.want.sleeps[c.Name]; ok && sleepOf(c) != w {
					t.Errorf("container %q preStop sleep = %d, want %d", c.Name, sleepOf(c), w)
				}
			}
			if !reflect.DeepEqual(res.PreStopKept, tt.want.kept) {
				t.Errorf("PreStopKept = %v, want %v", res.PreStopKept, tt.want.kept)
			}
			for _, name := range tt.want.kept {
				for i, c := range p.Spec.Containers {
					if c.Name == name && !equality.Semantic.DeepEqual(c.Lifecycle, before.Spec.Containers[i].Lifecycle) {
						t.Errorf("container %q lifecycle changed: %+v", name, c.Lifecycle)
					}
				}
				if len(res.Notes) == 0 {
					t.Errorf("kept preStop of %q not noted", name)
				}
			}
			if !reflect.DeepEqual(p.Spec.TerminationGracePeriodSeconds, tt.want.grace) {
				t.Errorf("terminationGracePeriodSeconds = %v, want %v", deref(p.Spec.TerminationGracePeriodSeconds), deref(tt.want.grace))
			}
			if before.Spec.TerminationGracePeriodSeconds != nil && p.Spec.TerminationGracePeriodSeconds != nil &&
				*p.Spec.TerminationGracePeriodSeconds < *before.Spec.TerminationGracePeriodSeconds {
				t.Errorf("grace period lowered from %d to %d", *before.Spec.TerminationGracePeriodSeconds, *p.Spec.TerminationGracePeriodSeconds)
			}
			got, ok := p.Annotations[v1beta1.AnnotationInjected]
			if (tt.want.annotation != "") != ok || got != tt.want.annotation {
				t.Errorf("annotation = %q (present %v), want %q", got, ok, tt.want.annotation)
			}

			// Injecting again changes nothing: Inject(Inject(p)) == Inject(p).
			once := p.DeepCopy()
			again := Inject(p, tt.reg)
			if again.Changed || !again.AlreadyInjected {
				t.Errorf("second Inject: Changed=%v AlreadyInjected=%v, want false/true", again.Changed, again.AlreadyInjected)
			}
			if !equality.Semantic.DeepEqual(once, p) {
				t.Errorf("second Inject modified the pod")
			}
		})
	}
}

// Only the original inputs are touched: labels, other annotations, other gates and the
// other lifecycle hooks of a serving container survive.
func TestInjectPreservesUnrelatedFields(t *testing.T) {
	c := container("app", cport("http", 8080))
	c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	p := pod(c)
	p.Annotations = map[string]string{"keep": "me"}
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "other/gate"}}
	res := Inject(p, registry(ptr.To[int32](12), port("http", 8080)))

	if p.Annotations["keep"] != "me" || p.Labels["app"] != "orders" {
		t.Errorf("unrelated metadata changed: %v %v", p.Annotations, p.Labels)
	}
	if len(p.Spec.ReadinessGates) != 2 || p.Spec.ReadinessGates[0].ConditionType != "other/gate" {
		t.Errorf("readiness gates = %v", p.Spec.ReadinessGates)
	}
	lc := p.Spec.Containers[0].Lifecycle
	if lc.PostStart == nil || lc.PostStart.Exec == nil || sleepOf(p.Spec.Containers[0]) != 12 {
		t.Errorf("lifecycle = %+v", lc)
	}
	if !res.GateAdded || !reflect.DeepEqual(res.PreStopAdded, []string{"app"}) || !reflect.DeepEqual(res.ServingContainers, []string{"app"}) {
		t.Errorf("result = %+v", res)
	}
	if res.GracePeriodBefore != nil || deref(res.GracePeriodAfter) != int64(42) {
		t.Errorf("grace before/after = %v/%v, want unset/42", deref(res.GracePeriodBefore), deref(res.GracePeriodAfter))
	}
	if len(res.Changes) != 4 { // gate, preStop, grace, annotation
		t.Errorf("changes = %q", res.Changes)
	}
}

func TestDrainSecondsAndEnabled(t *testing.T) {
	r := registry(nil)
	if DrainSeconds(r) != 15 {
		t.Errorf("default drain = %d", DrainSeconds(r))
	}
	r.Spec.Drain = &v1beta1.DrainSpec{Seconds: ptr.To[int32](0)}
	if DrainSeconds(r) != 0 {
		t.Errorf("drain 0 = %d", DrainSeconds(r))
	}
	if !Enabled(r) {
		t.Errorf("Enabled = false with injection.enabled")
	}
	r.Spec.Injection = nil
	if Enabled(r) {
		t.Errorf("Enabled = true without spec.injection")
	}
	r.Spec.Injection = &v1beta1.InjectionSpec{Enabled: ptr.To(false)}
	if Enabled(r) {
		t.Errorf("Enabled = true with injection.enabled=false")
	}
}

func deref(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}
