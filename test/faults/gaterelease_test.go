package faults

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// TestGatedPodReleasedWhenRegistryDeleted: a gated pod's registry is deleted while the pod
// warms up (issue 13, hole 7). Nothing else would ever set the gate: the operator process
// must release it (True, reason Released, an Event) and leave no endpoint in the store.
func TestGatedPodReleasedWhenRegistryDeleted(t *testing.T) {
	slow(t)
	requireSetup(t)
	ctx := testCtx(t)
	srv := startStore(t)
	const storePrefix = "/faults-gate"
	startOperator(t, "registrar", operatorConfig{store: srv.Endpoint(), prefix: storePrefix})

	// the pod: a slow HTTP server on loopback, so the warm-up runs as long as the test needs
	var requests atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.41:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
		}
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	port := int32(ln.Addr().(*net.TCPAddr).Port)

	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "faults-gate-"}}
	if err := k8s.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ports:    []v1beta1.ServicePort{{Name: "http", TargetPort: "http"}},
			Warmup: &v1beta1.WarmupSpec{Paths: []string{"/warm"}, Requests: 10000, Concurrency: 1,
				TimeoutMillis: 3600000},
		},
	}
	if err := k8s.Create(ctx, reg); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1beta1.ReadinessGate}},
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}}}},
		},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := setReady(ctx, pod, "127.0.0.41", true); err != nil {
		t.Fatal(err)
	}
	if !waitFor(30*time.Second, func() bool { return requests.Load() > 0 }) {
		t.Fatal("the warm-up did not start")
	}
	gate := func() corev1.PodCondition {
		cur := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return corev1.PodCondition{}
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == v1beta1.ReadinessGate {
				return c
			}
		}
		return corev1.PodCondition{}
	}
	if g := gate(); g.Status == corev1.ConditionTrue {
		t.Fatalf("gate True during the warm-up: %+v", g)
	}

	deleted := time.Now()
	if err := k8s.Delete(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if !waitFor(30*time.Second, func() bool { return gate().Status == corev1.ConditionTrue }) {
		t.Fatalf("the gate of a pod whose registry was deleted mid-warm-up stayed %+v", gate())
	}
	took := time.Since(deleted)
	g := gate()
	if g.Reason != v1beta1.GateReleased || !strings.Contains(g.Message, "no ServiceRegistry") {
		t.Errorf("released gate %+v, want reason %s and a message saying why", g, v1beta1.GateReleased)
	}
	before := requests.Load()
	time.Sleep(time.Second) // the warm-up must have stopped: scenario, not synchronisation
	if after := requests.Load(); after > before+1 {
		t.Errorf("warm-up requests kept coming after the registry was deleted: %d → %d", before, after)
	}
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, storePrefix+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), "/"+ns+"/") {
			left = append(left, string(kv.Key))
		}
	}
	if len(left) > 0 {
		t.Errorf("keys left in the store: %v", left)
	}
	report(result{fault: "G1. gated pod, registry deleted mid-warm-up", convergence: took,
		note: fmt.Sprintf("gate released (%s) %s after the delete; no key left", g.Reason, took.Round(100*time.Millisecond))})
}
