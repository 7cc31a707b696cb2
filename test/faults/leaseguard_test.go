package faults

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/test/support/netproxy"
)

// TestNodeLeaseGuard (issue 19, item 5): the operator is cut off from the API server (a TCP
// proxy between it and kube-apiserver is cut) while every node keeps renewing its Lease and
// the store stays reachable. Its cache shows every node Lease lapsing at once: without the
// guard it would deregister every pod. The recorder's "no eligible pod's endpoint deleted"
// invariant and a direct read of the store check that nothing is removed; the operator's
// registrar_deregistrations_held shows the guard holding. Then the proxy is restored and one
// node really stops renewing: its pods must leave the store within the node Lease bound.
func TestNodeLeaseGuard(t *testing.T) {
	slow(t)
	const (
		nodes       = 5
		podsPerNode = 2
		bound       = 4 * time.Second // --node-lease-timeout
		cut         = 4 * bound       // long past every Lease's lapse in the operator's cache
	)
	srv := startStore(t)
	s := newScenario(t, []string{srv.Endpoint()})
	kl := startKubelets(t, s.ctx, nodes)
	onNode := map[string]string{}
	for i := range nodes * podsPerNode {
		onNode[s.addReadyOn(kl.nodes[i%nodes])] = kl.nodes[i%nodes]
	}

	proxy, err := netproxy.New(apiHost(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	cfg := s.operatorConfig()
	cfg.extra = []string{"--kubeconfig=" + kubeconfigVia(t, proxy.Addr), fmt.Sprintf("--node-lease-timeout=%s", bound)}
	op := startOperator(t, "registrar", cfg)
	s.converge(time.Now())
	all := s.world.desired()

	// The operator is cut off from the API server; the kubelets keep renewing.
	proxy.Cut()
	cutAt := time.Now()
	var held float64
	for time.Since(cutAt) < cut {
		got, err := servicePods(s.ctx, s.store, s.checks.servicePrefix, s.checks.foreign)
		if err == nil && !equal(got, all) {
			t.Fatalf("%s after the operator was cut off from the API server the store holds %v, want every pod %v", time.Since(cutAt).Round(time.Millisecond), got, all)
		}
		if v, ok := op.metric("registrar_deregistrations_held"); ok {
			held = max(held, v)
		}
		time.Sleep(100 * time.Millisecond) // polling for the length of the fault
	}
	if held != float64(len(all)) {
		t.Fatalf("registrar_deregistrations_held peaked at %v during the cut, want %d (every endpoint held)", held, len(all))
	}
	proxy.Restore()
	restored := time.Now()
	if !waitFor(time.Minute, func() bool { v, ok := op.metric("registrar_deregistrations_held"); return ok && v == 0 }) {
		t.Fatal("the hold did not end after the operator reached the API server again")
	}
	resumed := time.Since(restored)
	if got, err := servicePods(s.ctx, s.store, s.checks.servicePrefix, s.checks.foreign); err != nil || !equal(got, all) {
		t.Fatalf("after the cut the store holds %v (%v), want %v", got, err, all)
	}

	// One node really dies: its pods leave within the bound.
	lost := kl.nodes[0]
	var gone []string
	for _, name := range all {
		if onNode[name] == lost {
			gone = append(gone, name)
		}
	}
	lastRenewal := kl.stop(lost)
	for _, name := range gone {
		s.world.ineligible(name)
	}
	conv := s.converge(lastRenewal)
	if limit := bound + 10*time.Second; conv > limit { // the bound, plus a reconcile on a loaded machine
		t.Errorf("the lost node's pods left the store %s after its last renewal, over %s", conv, limit)
	}
	note := fmt.Sprintf("operator cut off from the API server %s (%d nodes' Leases lapse in its cache, --node-lease-timeout=%s): all %d endpoints kept, %v held; hold ended %s after the restore; then one node lost: its %d pods deregistered %s after its last renewal",
		cut, nodes, bound, len(all), held, resumed.Round(10*time.Millisecond), len(gone), conv.Round(10*time.Millisecond))
	s.finish("19.5 node Lease guard: operator cut off from every Lease, then one node lost", conv, note)
}

// kubeconfigVia writes a copy of the operator's kubeconfig whose server is addr (a proxy in
// front of the API server; the certificate names 127.0.0.1, whatever the port).
func kubeconfigVia(t *testing.T, addr string) string {
	t.Helper()
	raw, err := os.ReadFile(kubeconf)
	if err != nil {
		t.Fatal(err)
	}
	host := apiHost(t)
	if !strings.Contains(string(raw), host) {
		t.Fatalf("kubeconfig does not name the API server %s", host)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-proxied")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(raw), host, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiHost is the API server's host:port.
func apiHost(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(restCfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// kubelets plays the kubelets of some nodes: each node's Lease (10 s, as the kubelet's 40 s
// is capped by --node-lease-timeout anyway) renewed every 500 ms, one goroutine per node,
// until stopped.
type kubelets struct {
	nodes   []string
	mu      sync.Mutex
	stopped map[string]time.Time // node → its last renewal
}

func startKubelets(t *testing.T, ctx context.Context, n int) *kubelets {
	t.Helper()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	k := &kubelets{stopped: map[string]time.Time{}}
	for range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "faults-node-"}}
		if err := k8s.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node.Name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node.Name), LeaseDurationSeconds: ptr.To[int32](10),
				RenewTime: &metav1.MicroTime{Time: time.Now()}},
		}
		if err := k8s.Create(ctx, lease); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = k8s.Delete(context.Background(), lease)
			_ = k8s.Delete(context.Background(), node)
		})
		k.nodes = append(k.nodes, node.Name)
	}
	// Each node renews on its own (as each kubelet does), so that many nodes on a loaded
	// machine do not renew late one after the other.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range k.nodes {
		wg.Go(func() {
			for ctx.Err() == nil {
				k.mu.Lock()
				_, dead := k.stopped[name]
				k.mu.Unlock()
				if dead {
					return
				}
				k.renew(ctx, name)
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond): // the kubelets' renew interval, scaled down
				}
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return k
}

func (k *kubelets) renew(ctx context.Context, node string) {
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}, lease); err != nil {
		return // the next round tries again
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_ = k8s.Update(ctx, lease)
}

// stop ends a node's renewals and returns its last renewal time, as the API server holds it.
func (k *kubelets) stop(node string) time.Time {
	k.mu.Lock()
	k.stopped[node] = time.Now()
	k.mu.Unlock()
	lease := &coordinationv1.Lease{}
	// A renewal in flight when stop was called may still land: wait a round, then read.
	time.Sleep(time.Second) // longer than one renewal round trip: scenario, not synchronisation
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}, lease); err != nil || lease.Spec.RenewTime == nil {
		return time.Now()
	}
	return lease.Spec.RenewTime.Time
}
