package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	namespace = "rollout"
	service   = "web"
	appLabel  = "app"
	portName  = "grpc"
	node      = "rollout-node"
	// terminationGrace is the grace period of the old pods' deletion: they stay terminating
	// until the harness, playing the kubelet, deletes them for good (Config.Grace later).
	terminationGrace = 30
)

// plan is the rollout of a Deployment of pods replicas from revision 1 to revision 2 with
// maxSurge surge and maxUnavailable 0: in each step, surge new pods are created and become
// ready, then as many old pods start terminating and, a grace later, are gone.
type plan struct {
	old, new []string // pod names
	steps    [][2]int // [from, to) indexes into old and new per step
}

// newPlan splits pods into steps of surge (the last one smaller when surge does not divide
// pods).
func newPlan(pods, surge int) plan {
	var p plan
	for i := range pods {
		p.old = append(p.old, fmt.Sprintf("%s-v1-%05d", service, i))
		p.new = append(p.new, fmt.Sprintf("%s-v2-%05d", service, i))
	}
	surge = max(surge, 1)
	for from := 0; from < pods; from += surge {
		p.steps = append(p.steps, [2]int{from, min(from+surge, pods)})
	}
	return p
}

// surgeOf is maxSurge's pod count for a percentage: rounded up, as the Deployment
// controller rounds maxSurge.
func surgeOf(pods int, percent float64) int {
	n := int(float64(pods)*percent/100 + 0.999999)
	return max(n, 1)
}

// podIP gives each pod an address of its own: revision 1 in 10.1/16, revision 2 in 10.2/16.
func podIP(rev, i int) string { return fmt.Sprintf("10.%d.%d.%d", rev, (i+1)>>8&255, (i+1)&255) }

// kubelet plays the kubelet and the Deployment controller through the API.
type kubelet struct {
	kube kubernetes.Interface
	// pacing: writes start at most rate per second, at most inFlight at once.
	rate     float64
	inFlight int
	errs     struct {
		sync.Mutex
		n     int
		first error
	}
}

func (k *kubelet) fail(err error) {
	k.errs.Lock()
	defer k.errs.Unlock()
	k.errs.n++
	if k.errs.first == nil {
		k.errs.first = err
	}
}

// paced runs fn for each of n items, starting them at k.rate per second (0: as fast as
// inFlight allows), and waits for them.
func (k *kubelet) paced(ctx context.Context, n int, fn func(ctx context.Context, i int) error) {
	sem := make(chan struct{}, k.inFlight)
	var wg sync.WaitGroup
	next := time.Now()
	for i := range n {
		if k.rate > 0 {
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d): // pacing the load generator, not synchronisation
				}
			}
			next = next.Add(time.Duration(float64(time.Second) / k.rate))
		}
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				k.fail(err)
			}
		})
	}
	wg.Wait()
}

func podSpec(name string, rev int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{appLabel: service, "pod-template-hash": fmt.Sprintf("rev%d", rev)}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1",
				Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: 8080}}}},
		},
	}
}

// create creates a pod and writes its status as the kubelet does once its containers
// started: Running with an IP, ready or not.
func (k *kubelet) create(ctx context.Context, name, ip string, rev int, isReady bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	created, err := k.kube.CoreV1().Pods(namespace).Create(ctx, podSpec(name, rev), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s: %w", name, err)
	}
	status := corev1.ConditionFalse
	if isReady {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	created.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: "192.0.2.1",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		},
	}
	if _, err := k.kube.CoreV1().Pods(namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("start pod %s: %w", name, err)
	}
	return nil
}

// markReady is the kubelet's status write when a pod's containers turn ready.
func (k *kubelet) markReady(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t := metav1.Now()
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
	}}})
	if _, err := k.kube.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("ready pod %s: %w", name, err)
	}
	return nil
}

// terminate starts a pod's graceful deletion (the ReplicaSet scaling down): the pod stays,
// terminating, until gone removes it.
func (k *kubelet) terminate(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := k.kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](terminationGrace)}); err != nil {
		return fmt.Errorf("terminate pod %s: %w", name, err)
	}
	return nil
}

// gone is the kubelet's final deletion once the pod's containers stopped.
func (k *kubelet) gone(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := k.kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	return nil
}
