//go:build eurekapeer

package eurekapeer

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

const namespace = "eurekapeer"

// kubelet plays the kubelet of registrar's side: each node's Lease (40 s, renewed every
// 10 s, the kubelet's defaults), and each pod's readiness from a probe of its process
// (GET /hello every 1 s, 1 s timeout, one failure marks it unready). A lost node renews
// nothing and reports nothing.
type kubelet struct {
	t   *testing.T
	ctx context.Context
	k8s client.Client

	mu    sync.Mutex
	nodes map[string]bool // node → lost
	pods  map[string]*pod
}

type pod struct {
	name, node, ip string
	ready          *bool // as last written
	gone           bool
}

func newKubelet(ctx context.Context, t *testing.T, env *testenv.Env) *kubelet {
	t.Helper()
	k := &kubelet{t: t, ctx: ctx, k8s: env.Client, nodes: map[string]bool{}, pods: map[string]*pod{}}
	for _, ns := range []string{corev1.NamespaceNodeLease, namespace} {
		if err := k.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	go k.renewLoop()
	go k.probeLoop()
	return k
}

// registry creates the ServiceRegistry of a scenario's service.
func (k *kubelet) registry(service string) {
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: service},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": service}},
			Ports:    []v1beta1.ServicePort{{Name: "http", Port: appPort}},
		},
	}
	if err := k.k8s.Create(k.ctx, reg); err != nil {
		k.t.Fatalf("create ServiceRegistry %s: %v", service, err)
	}
}

func (k *kubelet) addNode(name string) {
	k.mu.Lock()
	_, ok := k.nodes[name]
	k.nodes[name] = false
	k.mu.Unlock()
	if ok {
		return
	}
	if err := k.k8s.Create(k.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		k.t.Fatal(err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if err := k.k8s.Create(k.ctx, lease); err != nil && !apierrors.IsAlreadyExists(err) {
		k.t.Fatal(err)
	}
}

// addPod creates a pod on node (created if new) whose process serves ip:8080; the probe
// loop marks it ready once it answers.
func (k *kubelet) addPod(name, service, node, ip string) {
	k.addNode(node)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": service}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	if err := k.k8s.Create(k.ctx, p); err != nil {
		k.t.Fatalf("create pod %s: %v", name, err)
	}
	k.mu.Lock()
	k.pods[name] = &pod{name: name, node: node, ip: ip}
	k.mu.Unlock()
}

// deletePod starts the pod's deletion (grace seconds, as kubectl delete does); the kubelet
// keeps probing it until forget.
func (k *kubelet) deletePod(name string, grace int64) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := k.k8s.Delete(k.ctx, p, client.GracePeriodSeconds(grace)); err != nil && !apierrors.IsNotFound(err) {
		k.t.Errorf("delete pod %s: %v", name, err)
	}
}

// forget ends a pod: its process is gone; the pod object is removed at once.
func (k *kubelet) forget(name string) {
	k.mu.Lock()
	if p, ok := k.pods[name]; ok {
		p.gone = true
		delete(k.pods, name)
	}
	k.mu.Unlock()
	k.deletePod(name, 0)
}

// lose stops everything of a node: no Lease renewal, no pod status; restore resumes both.
func (k *kubelet) lose(node string, lost bool) {
	k.mu.Lock()
	k.nodes[node] = lost
	k.mu.Unlock()
	if !lost {
		k.renew(node)
	}
}

func (k *kubelet) renewLoop() {
	for k.ctx.Err() == nil {
		k.mu.Lock()
		var live []string
		for n, lost := range k.nodes {
			if !lost {
				live = append(live, n)
			}
		}
		k.mu.Unlock()
		for _, n := range live {
			k.renew(n)
		}
		select {
		case <-k.ctx.Done():
		case <-time.After(10 * time.Second): // the kubelet's renew interval
		}
	}
}

func (k *kubelet) renew(node string) {
	lease := &coordinationv1.Lease{}
	if err := k.k8s.Get(k.ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}, lease); err != nil {
		return // the next round tries again
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_ = k.k8s.Update(k.ctx, lease)
}

func (k *kubelet) probeLoop() {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for k.ctx.Err() == nil {
		k.mu.Lock()
		var todo []*pod
		for _, p := range k.pods {
			if !k.nodes[p.node] {
				todo = append(todo, p)
			}
		}
		k.mu.Unlock()
		var wg sync.WaitGroup
		for _, p := range todo {
			wg.Go(func() {
				ok := false
				if resp, err := hc.Get("http://" + addr(p.ip) + "/hello"); err == nil {
					ok = resp.StatusCode == http.StatusOK
					_ = resp.Body.Close()
				}
				k.mu.Lock()
				lost, gone := k.nodes[p.node], p.gone
				same := p.ready != nil && *p.ready == ok
				k.mu.Unlock()
				if lost || gone || same {
					return
				}
				if err := k.setReady(p, ok); err == nil {
					k.mu.Lock()
					p.ready = ptr.To(ok)
					k.mu.Unlock()
				}
			})
		}
		wg.Wait()
		select {
		case <-k.ctx.Done():
		case <-time.After(time.Second): // periodSeconds: 1
		}
	}
}

// setReady writes the kubelet's part of the pod status.
func (k *kubelet) setReady(p *pod, ready bool) error {
	cur := &corev1.Pod{}
	if err := k.k8s.Get(k.ctx, client.ObjectKey{Namespace: namespace, Name: p.name}, cur); err != nil {
		return err
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	cur.Status.Phase = corev1.PodRunning
	cur.Status.PodIP, cur.Status.PodIPs = p.ip, []corev1.PodIP{{IP: p.ip}}
	cur.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
	}
	return k.k8s.Status().Update(k.ctx, cur)
}
