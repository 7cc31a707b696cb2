package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// benchPod is one pod of the workload.
type benchPod struct {
	Namespace, Name, Service, Node, IP string
}

// ID is how watchers name the pod: namespace/name.
func (p benchPod) ID() string { return p.Namespace + "/" + p.Name }

// layout is the objects of a run: registry i lives in namespace i%Namespaces and selects
// app=svc-i; pod k belongs to registry k%Registries and runs on node k%Nodes.
type layout struct {
	namespaces []string
	services   []benchPod // Namespace and Service of each registry
	nodes      []string
	pods       []benchPod
}

func newLayout(c *Config) layout {
	var l layout
	for i := range c.Namespaces {
		l.namespaces = append(l.namespaces, fmt.Sprintf("bench-%d", i))
	}
	for i := range c.Nodes {
		l.nodes = append(l.nodes, fmt.Sprintf("bench-node-%d", i))
	}
	for i := range c.Registries {
		l.services = append(l.services, benchPod{Namespace: l.namespaces[i%c.Namespaces], Service: fmt.Sprintf("svc-%d", i)})
	}
	for k := range c.Pods {
		svc := l.services[k%c.Registries]
		n := k + 1
		l.pods = append(l.pods, benchPod{
			Namespace: svc.Namespace, Service: svc.Service, Node: l.nodes[k%c.Nodes],
			Name: fmt.Sprintf("%s-%d", svc.Service, k/c.Registries),
			IP:   fmt.Sprintf("10.%d.%d.%d", (n>>16)&255, (n>>8)&255, n&255),
		})
	}
	return l
}

// flippedPods are the indices of the pods the rounds flip, in ascending order: every pod when
// perRound is 0 or at least pods, otherwise perRound of them chosen by seed.
func flippedPods(pods, perRound int, seed int64) []int {
	if perRound <= 0 || perRound >= pods {
		out := make([]int, pods)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := rand.New(rand.NewPCG(uint64(seed), 3)).Perm(pods)[:perRound]
	slices.Sort(out)
	return out
}

// createInFlight bounds the creations in flight during setup: enough to keep the API server
// busy (its pace, not the harness's, sets how long 20,000 pods take), few enough to bound
// the harness's goroutines and connections' streams.
const createInFlight = 64

// forEach runs fn over n items with at most workers at once and returns the first error.
func forEach(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// createObjects creates namespaces, nodes, registries, Services and pods (Running, with an
// IP, ready when ready says so).
func (cl *cluster) createObjects(ctx context.Context, l layout, withServices, ready bool) error {
	for _, ns := range l.namespaces {
		if _, err := cl.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	for _, n := range l.nodes {
		if _, err := cl.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", n, err)
		}
	}
	if err := forEach(ctx, len(l.services), createInFlight, func(ctx context.Context, i int) error {
		return cl.createService(ctx, l.services[i], withServices)
	}); err != nil {
		return err
	}
	return forEach(ctx, len(l.pods), createInFlight, func(ctx context.Context, i int) error {
		return cl.createPod(ctx, l.pods[i], ready)
	})
}

const (
	// appLabel is the pod label the benchmark Services and ServiceRegistries select on.
	appLabel = "app"
	// portName is the name of the benchmark pods' one port.
	portName = "http"
)

func (cl *cluster) createService(ctx context.Context, s benchPod, withService bool) error {
	sel := map[string]string{appLabel: s.Service}
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Service},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: sel},
			Ports:    []v1beta1.ServicePort{{Name: portName, Port: 8080}},
		},
	}
	if err := cl.client.Create(ctx, reg); err != nil {
		return fmt.Errorf("create ServiceRegistry %s/%s: %w", s.Namespace, s.Service, err)
	}
	if !withService {
		return nil
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Service},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: sel,
			Ports: []corev1.ServicePort{{Name: portName, Port: 8080}}},
	}
	if _, err := cl.kube.CoreV1().Services(s.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Service %s/%s: %w", s.Namespace, s.Service, err)
	}
	return nil
}

func (cl *cluster) createPod(ctx context.Context, p benchPod, ready bool) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: map[string]string{appLabel: p.Service}},
		Spec: corev1.PodSpec{
			NodeName: p.Node,
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1",
				Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: 8080}}}},
		},
	}
	created, err := cl.kube.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s: %w", p.ID(), err)
	}
	now := metav1.Now()
	readiness := corev1.ConditionFalse
	if ready {
		readiness = corev1.ConditionTrue
	}
	created.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: p.IP, PodIPs: []corev1.PodIP{{IP: p.IP}}, HostIP: "192.0.2.1",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: readiness, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: readiness, LastTransitionTime: now},
		},
	}
	if _, err := cl.kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("start pod %s: %w", p.ID(), err)
	}
	return nil
}

// readinessPatch is the kubelet's status write when a pod's containers become ready or stop
// being ready: ContainersReady and Ready, merged by condition type.
func readinessPatch(ready bool, at time.Time) []byte {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	t := metav1.NewTime(at)
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: t},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: t},
	}}})
	return patch
}

// write makes one transition of p through the API.
func (cl *cluster) write(ctx context.Context, p benchPod, cause Cause, at time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pods := cl.kube.CoreV1().Pods(p.Namespace)
	var err error
	switch cause {
	case CauseReady, CauseUnready:
		_, err = pods.Patch(ctx, p.Name, types.StrategicMergePatchType, readinessPatch(cause == CauseReady, at), metav1.PatchOptions{}, "status")
	case CauseDelete:
		err = pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}
	if err != nil {
		return fmt.Errorf("%s pod %s: %w", cause, p.ID(), err)
	}
	return nil
}
