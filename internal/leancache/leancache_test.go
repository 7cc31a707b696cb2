package leancache

import (
	"encoding/json"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

// TestPodKeepsExactlyWhatRegistrarReads: of a realistic pod, the transform keeps exactly the
// fields of the audit in the package comment, and nothing else.
func TestPodKeepsExactlyWhatRegistrarReads(t *testing.T) {
	full := SamplePod(7)
	always := corev1.ContainerRestartPolicyAlways
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: full.Name, Namespace: "shop", UID: full.UID, ResourceVersion: full.ResourceVersion,
			CreationTimestamp: full.CreationTimestamp,
			Labels:            full.Labels,
			Annotations:       map[string]string{"registrar.dev/injected": "20"},
		},
		Spec: corev1.PodSpec{
			NodeName:       "node-007",
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}},
			InitContainers: []corev1.Container{{Name: "mesh-proxy", RestartPolicy: &always,
				Ports: []corev1.ContainerPort{{Name: "proxy-admin", ContainerPort: 15000}}}},
			Containers: []corev1.Container{{Name: "checkout", Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}, {Name: "grpc", ContainerPort: 9000}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: full.Status.PodIP, PodIPs: full.Status.PodIPs,
			Conditions: []corev1.PodCondition{
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: full.Status.Conditions[3].LastTransitionTime},
				full.Status.Conditions[5], // the gate, whole
			}},
	}
	if diff := cmp.Diff(want, Pod(full)); diff != "" {
		t.Errorf("Pod(SamplePod) differs from what registrar reads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(SamplePod(7), full); diff != "" {
		t.Errorf("the transform modified its input (-before +after):\n%s", diff)
	}
}

// TestPodVariants: deletion fields are kept, pods without annotations or sidecars stay
// without them, and the transform is idempotent (an informer may apply it to an object it
// already transformed).
func TestPodVariants(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		check  func(t *testing.T, lean *corev1.Pod)
	}{
		{"terminating", func(p *corev1.Pod) { p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, ptr.To[int64](30) },
			func(t *testing.T, lean *corev1.Pod) {
				if lean.DeletionTimestamp == nil || *lean.DeletionGracePeriodSeconds != 30 {
					t.Errorf("deletion fields dropped: %v %v", lean.DeletionTimestamp, lean.DeletionGracePeriodSeconds)
				}
			}},
		{"no registrar annotation", func(p *corev1.Pod) { delete(p.Annotations, "registrar.dev/injected") },
			func(t *testing.T, lean *corev1.Pod) {
				if lean.Annotations != nil {
					t.Errorf("annotations = %v, want none", lean.Annotations)
				}
			}},
		{"no native sidecar", func(p *corev1.Pod) { p.Spec.InitContainers = p.Spec.InitContainers[:1] },
			func(t *testing.T, lean *corev1.Pod) {
				if lean.Spec.InitContainers != nil {
					t.Errorf("init containers = %v, want none", lean.Spec.InitContainers)
				}
			}},
		{"a container without named ports", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers,
				corev1.Container{Name: "log-shipper", Image: "example.invalid/shipper:2"},
				corev1.Container{Name: "debug", Ports: []corev1.ContainerPort{{ContainerPort: 2345}}})
		}, func(t *testing.T, lean *corev1.Pod) {
			if len(lean.Spec.Containers) != 1 || lean.Spec.Containers[0].Name != "checkout" {
				t.Errorf("containers = %+v, want checkout only (the others have no named port)", lean.Spec.Containers)
			}
		}},
		{"containers unready", func(p *corev1.Pod) {
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == corev1.ContainersReady {
					p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = corev1.ConditionFalse, "ContainersNotReady"
					p.Status.Conditions[i].Message = "containers with unready status: [checkout]"
				}
			}
		}, func(t *testing.T, lean *corev1.Pod) {
			want := []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
				LastTransitionTime: SamplePod(1).Status.Conditions[3].LastTransitionTime}}
			if diff := cmp.Diff(want, lean.Status.Conditions[:1]); diff != "" {
				t.Errorf("ContainersReady (-want +got):\n%s", diff)
			}
		}},
		{"pending, unscheduled", func(p *corev1.Pod) {
			p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending}
		}, func(t *testing.T, lean *corev1.Pod) {
			if lean.Status.Phase != corev1.PodPending || lean.Spec.NodeName != "" || lean.Status.PodIP != "" {
				t.Errorf("status = %+v", lean.Status)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := SamplePod(1)
			tt.mutate(p)
			lean := Pod(p)
			tt.check(t, lean)
			if diff := cmp.Diff(lean, Pod(lean)); diff != "" {
				t.Errorf("not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}

// TestRepeatedStringsAreConstants: the condition strings of a decoded pod are replaced by
// the constants, so that the cache does not hold a copy per pod.
func TestRepeatedStringsAreConstants(t *testing.T) {
	data, err := json.Marshal(SamplePod(2))
	if err != nil {
		t.Fatal(err)
	}
	var decoded corev1.Pod
	if err := json.Unmarshal(data, &decoded); err != nil {
		t.Fatal(err)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	lean := Pod(&decoded)
	cr, gate := lean.Status.Conditions[0], lean.Status.Conditions[1]
	for _, c := range []struct{ got, want string }{
		{string(cr.Type), string(corev1.ContainersReady)}, {string(cr.Status), string(corev1.ConditionTrue)},
		{string(gate.Type), v1beta1.ReadinessGate}, {string(gate.Status), string(corev1.ConditionTrue)},
		{gate.Reason, v1beta1.GateRegistered},
	} {
		if c.got != c.want || !same(c.got, c.want) {
			t.Errorf("%q is a decoded copy, want the constant %q", c.got, c.want)
		}
	}
}

// TestDecisionsUnchanged: every decision registrar takes from a pod is the same on the
// full pod and on the cached (transformed) one, across the states a pod goes through.
func TestDecisionsUnchanged(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 30, 0, time.UTC)
	del := metav1.NewTime(now.Add(-5 * time.Second))
	setCond := func(p *corev1.Pod, typ corev1.PodConditionType, st corev1.ConditionStatus, reason string) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == typ {
				p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = st, reason
			}
		}
	}
	states := map[string]func(*corev1.Pod){
		"ready":              func(*corev1.Pod) {},
		"containers unready": func(p *corev1.Pod) { setCond(p, corev1.ContainersReady, corev1.ConditionFalse, "") },
		"gate warming": func(p *corev1.Pod) {
			setCond(p, v1beta1.ReadinessGate, corev1.ConditionFalse, v1beta1.ReasonWarmingUp)
		},
		"gate warmed": func(p *corev1.Pod) { setCond(p, v1beta1.ReadinessGate, corev1.ConditionFalse, v1beta1.GateWarmedUp) },
		"terminating": func(p *corev1.Pod) { p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &del, ptr.To[int64](50) },
		"no IP":       func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil },
		"failed":      func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
		"ungated":     func(p *corev1.Pod) { p.Spec.ReadinessGates = nil },
		// A container restarted after the gate opened (SIGKILL, OOM kill): warmed up again.
		"container restarted": func(p *corev1.Pod) {
			cs := &p.Status.ContainerStatuses[0]
			cs.RestartCount, cs.State.Running.StartedAt = 1, metav1.NewTime(now.Add(-time.Second))
		},
	}
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", UID: "reg"},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "checkout"}},
			Ports: []v1beta1.ServicePort{{Name: "http", TargetPort: "http"}, {Name: "admin", TargetPort: "proxy-admin"},
				{Name: "fixed", Port: 7000}},
			Warmup: &v1beta1.WarmupSpec{},
		},
	}
	for name, mutate := range states {
		t.Run(name, func(t *testing.T) {
			full := SamplePod(3)
			mutate(full)
			lean := Pod(full)
			type decisions struct {
				Decision eligibility.Decision
				Gate     bool
				GateCond *corev1.PodCondition
				GateWant eligibility.GateWant
				GateOK   bool
				Drain    *time.Time
				Ports    map[string]int32
				PortErr  string
				Endpoint any
				Lag      time.Duration
				LagOK    bool
			}
			decide := func(p *corev1.Pod) decisions {
				var d decisions
				d.Decision = eligibility.Decide(eligibility.Facts{Pod: p, WarmupRequired: true, Now: now})
				d.Gate, d.GateCond = eligibility.HasGate(p), eligibility.GateCondition(p)
				d.GateWant, d.GateOK = eligibility.GateFor(p, d.Decision.Verdict, true)
				d.Drain = eligibility.DrainUntil(p, 20)
				var err error
				if d.Ports, err = eligibility.ResolvePorts(reg.Spec.Ports, p); err != nil {
					d.PortErr = err.Error()
				}
				ep, err := eligibility.Endpoint(reg, p, eligibility.Placement{Zone: "z", Cluster: "c"})
				d.Endpoint = []any{ep, err}
				d.Lag, d.LagOK = eligibility.DeregistrationLag(p, d.Decision.Verdict, now)
				return d
			}
			if d := decide(full); name == "ready" && (d.PortErr != "" || len(d.Ports) != 3 || !d.Decision.Eligible()) {
				t.Fatalf("the sample pod is not a registrable pod: %+v", d)
			}
			if diff := cmp.Diff(decide(full), decide(lean)); diff != "" {
				t.Errorf("decisions differ on the cached pod (-full +cached):\n%s", diff)
			}
		})
	}
}

func TestDeploymentKeepsMetadataAndSelector(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	full := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "checkout", Namespace: "shop", UID: "d", Generation: 4, CreationTimestamp: t0,
			Annotations:   map[string]string{"registrar.dev/service": "checkout"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "checkout"}},
			Template: corev1.PodTemplateSpec{Spec: SamplePod(0).Spec}},
		Status: appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 3},
	}
	want := &appsv1.Deployment{ObjectMeta: *full.ObjectMeta.DeepCopy(), Spec: appsv1.DeploymentSpec{Selector: full.Spec.Selector}}
	want.ManagedFields = nil
	got := Deployment(full)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deployment (-want +got):\n%s", diff)
	}
	if len(full.ManagedFields) != 1 {
		t.Error("the transform modified its input")
	}
}

func TestTransformsPassOtherObjects(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for _, tf := range []func(any) (any, error){TransformPod, TransformDeployment} {
		if got, err := tf(node); err != nil || got != any(node) {
			t.Errorf("transform changed a Node: %v, %v", got, err)
		}
	}
}

// TestSerializedSize: the cached pod is a small fraction of the full one (the measurement
// of the heap is bench/podbytes; see docs/performance.md).
func TestSerializedSize(t *testing.T) {
	full, err := json.Marshal(SamplePod(1))
	if err != nil {
		t.Fatal(err)
	}
	lean, err := json.Marshal(Pod(SamplePod(1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("JSON bytes per pod: full %d, cached %d", len(full), len(lean))
	if len(lean)*3 > len(full) {
		t.Errorf("cached pod is %d bytes of JSON, more than a third of the full %d", len(lean), len(full))
	}
}
