//go:build interop

package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/proc"
	"github.com/registrar-dev/registrar/test/support/zktest"
)

const (
	prefix = "/registrar/services"
	// web is the service the callers look up; anchor has one pod that never changes, so that
	// the Eureka client's registry is never empty (an empty local registry makes the client
	// fetch in full every time: DiscoveryClient.fetchRegistry).
	web, anchor = "web", "anchor"
	// nodeLeaseTimeout is the operator's --node-lease-timeout.
	nodeLeaseTimeout = 4 * time.Second
	// lbCacheTTL is the callers' spring.cloud.loadbalancer.cache.ttl.
	lbCacheTTL = time.Second
)

// world is one test's namespace, nodes and pods, the operator writing the etcd and ZooKeeper
// stores, cmd/eureka-api following etcd, and a recording of the etcd store's changes.
type world struct {
	t   *testing.T
	ctx context.Context
	ns  string

	etcd     *etcdtest.Server
	store    *clientv3.Client
	zk       *zktest.Server
	operator *proc.Process
	opAddr   string // operator's metrics address

	eurekaAPI     *proc.Process
	eurekaURL     string // http://host:port/eureka
	eurekaMetrics string // host:port of /metrics

	nodes *kubelets
	rec   *storeRecorder

	mu   sync.Mutex
	pods map[string]*corev1.Pod // name → pod (as created)
	ips  map[string]string      // name → IP
	next int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	t.Cleanup(cancel)
	w := &world{t: t, ctx: ctx, pods: map[string]*corev1.Pod{}, ips: map[string]string{}}

	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "interop-"}}
	if err := k8s.Create(ctx, nsObj); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	w.ns = nsObj.Name

	var err error
	if w.etcd, err = etcdtest.Start(t.TempDir()); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(w.etcd.Stop)
	if w.store, err = etcdclient.New(etcdclient.Config{Endpoints: []string{w.etcd.Endpoint()}, DialTimeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.store.Close() })
	w.rec = recordStore(t, ctx, w.store, fmt.Sprintf("%s/%s/%s/", prefix, web, w.ns))

	if w.zk, err = zktest.Start(t.TempDir()); err != nil {
		t.Fatalf("start ZooKeeper: %v", err)
	}
	t.Cleanup(w.zk.Stop)

	for _, svc := range []string{web, anchor} {
		reg := &v1beta1.ServiceRegistry{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: svc},
			Spec: v1beta1.ServiceRegistrySpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": svc}},
				Ports:    []v1beta1.ServicePort{{Name: "http", Port: 8080}},
			},
		}
		if err := k8s.Create(ctx, reg); err != nil {
			t.Fatalf("create ServiceRegistry %s: %v", svc, err)
		}
		t.Cleanup(func() { forceDelete(reg) })
	}
	w.nodes = startKubelets(t, ctx, 3)
	w.startOperator()
	w.startEurekaAPI()
	return w
}

// startOperator runs registrar (./cmd) against envtest, writing etcd and ZooKeeper.
func (w *world) startOperator() {
	w.t.Helper()
	w.opAddr = freeAddr(w.t)
	args := []string{
		"--kubeconfig=" + kubeconf, "--store-endpoints=" + w.etcd.Endpoint(), "--store-prefix=" + prefix,
		"--stores=etcd,zookeeper", "--zookeeper-servers=" + w.zk.Addr,
		"--enable-webhook=false", "--metrics-bind-address=" + w.opAddr, "--health-probe-bind-address=0",
		"--leader-elect=false", "--store-fence-name=interop", "--store-timeout=2s",
		"--node-lease-timeout=" + nodeLeaseTimeout.String(), "--zap-log-level=info",
	}
	p, err := proc.Start(proc.Config{Name: "registrar", Bin: registrarBin, Args: args, LogPath: filepath.Join(logDir, w.t.Name()+"-registrar.log")})
	if err != nil {
		w.t.Fatalf("start operator: %v", err)
	}
	w.operator = p
	w.t.Cleanup(func() {
		p.Kill()
		if w.t.Failed() {
			w.t.Logf("--- registrar log tail ---\n%s", p.LogTail(30))
		}
	})
}

// startEurekaAPI runs cmd/eureka-api following the etcd store and waits until it is ready.
func (w *world) startEurekaAPI() {
	w.t.Helper()
	listen, metricsAddr := freeAddr(w.t), freeAddr(w.t)
	args := []string{"--store-endpoints=" + w.etcd.Endpoint(), "--prefix=" + prefix, "--listen=" + listen,
		"--metrics-listen=" + metricsAddr, "--zap-log-level=info"}
	p, err := proc.Start(proc.Config{Name: "eureka-api", Bin: eurekaAPIBin, Args: args, LogPath: filepath.Join(logDir, w.t.Name()+"-eureka-api.log")})
	if err != nil {
		w.t.Fatalf("start eureka-api: %v", err)
	}
	w.eurekaAPI, w.eurekaURL, w.eurekaMetrics = p, "http://"+listen+"/eureka", metricsAddr
	w.t.Cleanup(func() {
		p.Kill()
		if w.t.Failed() {
			w.t.Logf("--- eureka-api log tail ---\n%s", p.LogTail(30))
		}
	})
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Minute)
	defer cancel()
	if err := p.WaitHTTP(ctx, "http://"+metricsAddr+"/readyz"); err != nil {
		w.t.Fatalf("eureka-api: %v", err)
	}
}

// retry runs op until it succeeds, for up to a minute (an API server write on a loaded machine).
func (w *world) retry(what string, op func() error) {
	w.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := op()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond) // retry pacing
	}
}

// addPod creates pod {service}-N on node ("" leaves it unscheduled) and plays the kubelet:
// Running, an IP of its own, ready. It returns the pod's name.
func (w *world) addPod(service, node string) string {
	w.t.Helper()
	w.mu.Lock()
	w.next++
	n := w.next
	w.mu.Unlock()
	name := fmt.Sprintf("%s-%d", service, n)
	ip := fmt.Sprintf("10.77.%d.%d", n/250, 1+n%250)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: map[string]string{"app": service}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	w.retry("create pod "+name, func() error {
		err := k8s.Create(w.ctx, pod)
		if apierrors.IsAlreadyExists(err) {
			return k8s.Get(w.ctx, client.ObjectKeyFromObject(pod), pod)
		}
		return err
	})
	w.mu.Lock()
	w.pods[name], w.ips[name] = pod, ip
	w.mu.Unlock()
	w.setReady(name, true)
	return name
}

// setReady writes the kubelet's part of the pod's status: Running, its IP, ready or not.
func (w *world) setReady(name string, ready bool) {
	w.t.Helper()
	w.mu.Lock()
	pod, ip := w.pods[name], w.ips[name]
	w.mu.Unlock()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	w.retry(fmt.Sprintf("set pod %s ready=%v", name, ready), func() error {
		cur := &corev1.Pod{}
		if err := k8s.Get(w.ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodRunning
		cur.Status.PodIP, cur.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		cur.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		}
		return k8s.Status().Update(w.ctx, cur)
	})
}

// deletePod deletes a pod at once (envtest has no kubelet to finish a graceful deletion).
func (w *world) deletePod(name string) {
	w.t.Helper()
	w.mu.Lock()
	pod := w.pods[name]
	w.mu.Unlock()
	w.retry("delete pod "+name, func() error {
		return client.IgnoreNotFound(k8s.Delete(w.ctx, pod, client.GracePeriodSeconds(0)))
	})
}

// addr is the "host:port" a caller picks for a pod.
func (w *world) addr(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ips[name] + ":8080"
}

// instanceIDs are the IDs each kind of caller knows a pod by: Eureka's "{pod}.{namespace}"
// (internal/eureka) and Curator's "{namespace}.{pod}" (internal/store/zookeeper).
func (w *world) eurekaID(pod string) string { return pod + "." + w.ns }
func (w *world) zkID(pod string) string     { return w.ns + "." + pod }

// key is a pod's etcd key.
func (w *world) key(service, pod string) string {
	return fmt.Sprintf("%s/%s/%s/%s", prefix, service, w.ns, pod)
}

// storePods lists the pods of a service in the etcd store.
func (w *world) storePods(service string) []string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	p := fmt.Sprintf("%s/%s/%s/", prefix, service, w.ns)
	resp, err := w.store.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		w.t.Fatalf("read the store: %v", err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, strings.TrimPrefix(string(kv.Key), p))
	}
	sort.Strings(out)
	return out
}

// forceDelete deletes a ServiceRegistry without waiting for an operator's finalizer.
func forceDelete(reg *v1beta1.ServiceRegistry) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cur := &v1beta1.ServiceRegistry{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(reg), cur); err != nil {
		return
	}
	cur.Finalizers = nil
	_ = k8s.Update(ctx, cur)
	_ = k8s.Delete(ctx, cur)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := ports.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// kubelets plays the kubelets of some nodes: each node's Lease renewed every 500 ms until
// the node is lost.
type kubelets struct {
	names []string
	mu    sync.Mutex
	lost  map[string]bool
}

func startKubelets(t *testing.T, ctx context.Context, n int) *kubelets {
	t.Helper()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	k := &kubelets{lost: map[string]bool{}}
	for range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "interop-node-"}}
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
		k.names = append(k.names, node.Name)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range k.names {
		wg.Go(func() {
			for ctx.Err() == nil {
				k.mu.Lock()
				lost := k.lost[name]
				k.mu.Unlock()
				if lost {
					return
				}
				lease := &coordinationv1.Lease{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, lease); err == nil {
					lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
					_ = k8s.Update(ctx, lease)
				}
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond): // the kubelet's renew interval, scaled down
				}
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return k
}

// lose stops a node's renewals and returns its last renewal as the API server holds it.
func (k *kubelets) lose(ctx context.Context, node string) time.Time {
	k.mu.Lock()
	k.lost[node] = true
	k.mu.Unlock()
	time.Sleep(time.Second) // a renewal in flight may still land: scenario pacing, not synchronisation
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}, lease); err != nil || lease.Spec.RenewTime == nil {
		return time.Now()
	}
	return lease.Spec.RenewTime.Time
}

// storeRecorder timestamps every change of the etcd store under one prefix as this process's
// watch receives it.
type storeRecorder struct {
	mu      sync.Mutex
	changed *sync.Cond
	events  []storeEvent
}

type storeEvent struct {
	key     string
	deleted bool
	at      time.Time
}

func recordStore(t *testing.T, ctx context.Context, cli *clientv3.Client, p string) *storeRecorder {
	t.Helper()
	r := &storeRecorder{}
	r.changed = sync.NewCond(&r.mu)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	ch := cli.Watch(wctx, p, clientv3.WithPrefix())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for resp := range ch {
			at := time.Now()
			r.mu.Lock()
			for _, ev := range resp.Events {
				r.events = append(r.events, storeEvent{key: string(ev.Kv.Key), deleted: ev.Type == clientv3.EventTypeDelete, at: at})
			}
			r.changed.Broadcast()
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		r.mu.Lock()
		r.changed.Broadcast()
		r.mu.Unlock()
	})
	return r
}

// mark is the number of events recorded so far.
func (r *storeRecorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// await returns the time of the first event at index ≥ from of key with that type, waiting
// up to d; ok is false when none came.
func (r *storeRecorder) await(from int, key string, deleted bool, d time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(d)
	stop := time.AfterFunc(d, func() { r.mu.Lock(); r.changed.Broadcast(); r.mu.Unlock() })
	defer stop.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for i := from; i < len(r.events); i++ {
			if ev := r.events[i]; ev.key == key && ev.deleted == deleted {
				return ev.at, true
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		from = len(r.events)
		r.changed.Wait()
	}
}
