package sharding

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/sharding"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
	"github.com/registrar-dev/registrar/test/support/proc"
)

const (
	shardCount = 16
	service    = "web"
	// leaseDuration is the replicas' --shard-lease-duration: a killed replica's shards are
	// taken over about this long after its last renewal.
	leaseDuration = 3 * time.Second
	waitLimit     = 90 * time.Second // generous: the machine is shared
)

// harness is one test's ring: its own store prefix, ring name and Lease namespace, the
// namespaces of its registries, and the store's history as a separate client saw it.
type harness struct {
	t                     *testing.T
	ctx                   context.Context
	ring, prefix, leaseNS string
	store                 *clientv3.Client
	namespaces            []string

	mu      sync.Mutex
	want    map[string]bool // endpoint keys that must be in the store
	puts    map[string]int  // per endpoint key, as the watch saw them
	deletes map[string]int
	lost    []string // keys a poll saw and a later poll missed
	pods    int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	requireSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	suffix := fmt.Sprintf("%05x", rand.IntN(1<<20))
	h := &harness{
		t: t, ctx: ctx, ring: "ring-" + suffix, prefix: "/sharding-" + suffix,
		want: map[string]bool{}, puts: map[string]int{}, deletes: map[string]int{},
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{storeURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.store = cli
	t.Cleanup(func() { cancel(); _ = cli.Close() })
	h.leaseNS = h.createNamespace("leases-" + suffix)
	resp, err := cli.Get(ctx, "/") // the revision the watch starts after
	if err != nil {
		t.Fatal(err)
	}
	h.watch(resp.Header.Revision)
	go h.poll()
	return h
}

// endpointKey tells whether key is an endpoint of this test (not a fence or another test's).
func (h *harness) endpointKey(key string) bool {
	if !strings.HasPrefix(key, h.prefix+"/") || strings.Contains(key, "/"+etcdstore.FenceDir+"/") {
		return false
	}
	for _, ns := range h.namespaces {
		if strings.HasPrefix(key, h.prefix+"/"+service+"/"+ns+"/") {
			return true
		}
	}
	return false
}

// watch counts every put and delete of the test's endpoint keys from rev on.
func (h *harness) watch(rev int64) {
	wc := h.store.Watch(clientv3.WithRequireLeader(h.ctx), h.prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	go func() {
		for resp := range wc {
			if err := resp.Err(); err != nil && h.ctx.Err() == nil {
				h.t.Errorf("store watch: %v", err) // compaction or cancellation: the count would be incomplete
				return
			}
			h.mu.Lock()
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				if !h.endpointKey(key) {
					continue
				}
				if ev.Type == clientv3.EventTypeDelete {
					h.deletes[key]++
				} else {
					h.puts[key]++
				}
			}
			h.mu.Unlock()
		}
	}()
}

// poll reads the store every 100 ms with the separate client: a key once present and
// later absent is an endpoint lost (no pod of this test stops being eligible, except the
// one expectDelete names).
func (h *harness) poll() {
	seen := map[string]bool{}
	for h.ctx.Err() == nil {
		keys, err := h.keys()
		if err == nil {
			now := map[string]bool{}
			for _, k := range keys {
				now[k] = true
				seen[k] = true
			}
			h.mu.Lock()
			for k := range seen {
				if !now[k] && h.want[k] {
					h.lost = append(h.lost, fmt.Sprintf("%s at %s", k, time.Now().Format(time.StampMilli)))
					delete(seen, k)
				}
			}
			h.mu.Unlock()
		}
		select {
		case <-h.ctx.Done():
		case <-time.After(100 * time.Millisecond): // the Consistently poll's period
		}
	}
}

// keys are the test's endpoint keys in the store now.
func (h *harness) keys() ([]string, error) {
	ctx, cancel := context.WithTimeout(h.ctx, 3*time.Second)
	defer cancel()
	resp, err := h.store.Get(ctx, h.prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); h.endpointKey(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (h *harness) createNamespace(name string) string {
	h.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(h.ctx, ns); err != nil {
		h.t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// pickNamespaces chooses namespace names (random per run) until each of the first members
// owns at least two by the hash, and the joining member owns at least two once it joins
// without leaving.
func (h *harness) pickNamespaces(suffix string, first []string, leaving, joining string) []string {
	after := append(slices.DeleteFunc(slices.Clone(first), func(m string) bool { return m == leaving }), joining)
	count := func(nss []string, members []string) map[string]int {
		out := map[string]int{}
		for _, ns := range nss {
			out[sharding.Owner(sharding.ShardOf(ns, shardCount), members)]++
		}
		return out
	}
	var nss []string
	for i := 0; i < 60; i++ {
		nss = append(nss, fmt.Sprintf("shard-%s-%d", suffix, i))
		before, later := count(nss, first), count(nss, after)
		ok := later[joining] >= 2
		for _, m := range first {
			ok = ok && before[m] >= 2
		}
		if ok {
			return nss
		}
	}
	h.t.Fatalf("no spread of namespaces found over %v", first)
	return nil
}

// setUp creates the namespaces, one ServiceRegistry each and two ready pods in each. The
// registries share one service name across the namespaces: each shares it with every
// namespace (spec.sharing), so the oldest one, owner of the name, admits the others
// (docs/security.md, "Tenancy"), whichever replica's shard each is in.
func (h *harness) setUp(nss []string) {
	h.mu.Lock()
	h.namespaces = nss
	h.mu.Unlock()
	for _, ns := range nss {
		h.createNamespace(ns)
		reg := &v1beta1.ServiceRegistry{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service},
			Spec: v1beta1.ServiceRegistrySpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": service}},
				Ports:    []v1beta1.ServicePort{{Name: "http", Port: 8080}},
				Sharing:  &v1beta1.SharingSpec{Namespaces: []string{"*"}},
			},
		}
		if err := k8s.Create(h.ctx, reg); err != nil {
			h.t.Fatalf("create ServiceRegistry in %s: %v", ns, err)
		}
		h.t.Cleanup(func() { forceDelete(reg) })
		h.addPod(ns)
		h.addPod(ns)
	}
}

// forceDelete deletes a ServiceRegistry without waiting for an operator's finalizer, so the
// next test's replicas do not write it.
func forceDelete(obj *v1beta1.ServiceRegistry) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		reg := &v1beta1.ServiceRegistry{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), reg)
		if err == nil {
			reg.Finalizers = nil
			if err = k8s.Update(ctx, reg); err == nil {
				err = k8s.Delete(ctx, reg)
			}
		}
		if client.IgnoreNotFound(err) == nil {
			return
		}
		time.Sleep(200 * time.Millisecond) // retrying a conflict
	}
}

// addPod creates a pod in ns and plays the kubelet: running, ready, with an IP.
func (h *harness) addPod(ns string) string {
	h.t.Helper()
	h.mu.Lock()
	h.pods++
	n := h.pods
	h.mu.Unlock()
	name := fmt.Sprintf("web-%d", n)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": service}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	if err := k8s.Create(h.ctx, pod); err != nil {
		h.t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	h.setReady(pod, fmt.Sprintf("10.1.%d.%d", n/256, n%256), true)
	h.mu.Lock()
	h.want[h.prefix+"/"+service+"/"+ns+"/"+name] = true
	h.mu.Unlock()
	return name
}

func (h *harness) setReady(pod *corev1.Pod, ip string, ready bool) {
	h.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	for attempt := 0; ; attempt++ {
		cur := &corev1.Pod{}
		err := k8s.Get(h.ctx, client.ObjectKeyFromObject(pod), cur)
		if err == nil {
			now := metav1.Now()
			cur.Status.Phase = corev1.PodRunning
			cur.Status.PodIP, cur.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
			cur.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
			}
			err = k8s.Status().Update(h.ctx, cur)
		}
		if err == nil {
			return
		}
		if attempt == 20 {
			h.t.Fatalf("pod status of %s: %v", pod.Name, err)
		}
		time.Sleep(100 * time.Millisecond) // retrying a conflict
	}
}

// waitStore waits until the store holds exactly the wanted endpoints.
func (h *harness) waitStore(what string) time.Duration {
	h.t.Helper()
	start := time.Now()
	var got []string
	for time.Since(start) < waitLimit {
		var err error
		got, err = h.keys()
		h.mu.Lock()
		want := make([]string, 0, len(h.want))
		for k, ok := range h.want {
			if ok {
				want = append(want, k)
			}
		}
		h.mu.Unlock()
		sort.Strings(want)
		if err == nil && slices.Equal(got, want) {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	h.mu.Lock()
	var missing, extra []string
	for k, ok := range h.want {
		if ok && !slices.Contains(got, k) {
			missing = append(missing, k)
		}
	}
	for _, k := range got {
		if !h.want[k] {
			extra = append(extra, k)
		}
	}
	h.mu.Unlock()
	h.t.Fatalf("%s: the store did not converge within %s: missing %v, extra %v; fence holders %v", what, waitLimit, missing, extra, h.holders())
	return 0
}

// holders are the fence holders of the shards of the test's namespaces, by namespace.
func (h *harness) holders() map[string]string {
	out := map[string]string{}
	for _, ns := range h.namespaces {
		key := fence.ShardKey(h.prefix, h.ring, sharding.ShardOf(ns, shardCount))
		ctx, cancel := context.WithTimeout(h.ctx, 3*time.Second)
		resp, err := h.store.Get(ctx, key)
		cancel()
		if err == nil && len(resp.Kvs) == 1 {
			out[ns] = string(resp.Kvs[0].Value)
		}
	}
	return out
}

// expectOwners waits until the shard of every namespace is held by its owner among
// members, and returns how long that took.
func (h *harness) expectOwners(what string, members []string) time.Duration {
	h.t.Helper()
	start := time.Now()
	want := map[string]string{}
	for _, ns := range h.namespaces {
		want[ns] = sharding.Owner(sharding.ShardOf(ns, shardCount), members)
	}
	var got map[string]string
	for time.Since(start) < waitLimit {
		got = h.holders()
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	h.t.Fatalf("%s: shard fences never matched the members %v: holders %v, want %v", what, members, got, want)
	return 0
}

// owned are the test's namespaces owner holds among members.
func (h *harness) owned(owner string, members []string) []string {
	var out []string
	for _, ns := range h.namespaces {
		if sharding.Owner(sharding.ShardOf(ns, shardCount), members) == owner {
			out = append(out, ns)
		}
	}
	return out
}

// replica is one registrar process of the ring.
type replica struct {
	*proc.Process
	id string
}

func (h *harness) start(id string, extra ...string) *replica {
	h.t.Helper()
	args := []string{
		"--kubeconfig=" + kubeconf, "--store-endpoints=" + storeURL, "--store-prefix=" + h.prefix,
		"--enable-webhook=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--leader-elect=false", "--store-timeout=2s", "--zap-log-level=info",
		"--sharding=lease", "--shard-id=" + id, "--shard-count=" + fmt.Sprint(shardCount),
		"--shard-lease-namespace=" + h.leaseNS, "--store-fence-name=" + h.ring,
		"--shard-lease-duration=" + leaseDuration.String(), "--shard-renew-period=500ms",
	}
	args = append(args, extra...)
	p, err := proc.Start(proc.Config{Name: id, Bin: binary, Args: args, LogPath: filepath.Join(h.t.TempDir(), id+".log")})
	if err != nil {
		h.t.Fatalf("start %s: %v", id, err)
	}
	r := &replica{Process: p, id: id}
	h.t.Cleanup(func() {
		r.Kill()
		if h.t.Failed() {
			h.t.Logf("--- last lines of %s ---\n%s", id, r.LogTail(30))
		}
	})
	return r
}

// verify checks the store's history: every wanted endpoint written exactly once and never
// deleted, except those in deleted, deleted exactly once; nothing a poll saw went missing.
func (h *harness) verify(deleted map[string]bool) {
	h.t.Helper()
	time.Sleep(time.Second) // let the watch deliver the last events (its lag is not under test)
	h.mu.Lock()
	defer h.mu.Unlock()
	for key := range h.want {
		if h.puts[key] != 1 {
			h.t.Errorf("endpoint %s written %d times, want once", key, h.puts[key])
		}
		if want := map[bool]int{true: 1}[deleted[key]]; h.deletes[key] != want {
			h.t.Errorf("endpoint %s deleted %d times, want %d", key, h.deletes[key], want)
		}
	}
	for key := range h.puts {
		if !h.want[key] && !deleted[key] {
			h.t.Errorf("endpoint %s written but no such pod is eligible", key)
		}
	}
	for _, l := range h.lost {
		h.t.Errorf("endpoint lost: %s", l)
	}
	h.t.Logf("store history: %d endpoints, %d puts, %d deletes, %d lost", len(h.want)+len(deleted), sum(h.puts), sum(h.deletes), len(h.lost))
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestShardedReplicas: three replicas share the registries; one is killed, one added, one
// stopped cleanly; no endpoint is lost or written twice at any hand-over.
func TestShardedReplicas(t *testing.T) {
	h := newHarness(t)
	a, b, c, d := "replica-a", "replica-b", "replica-c", "replica-d"
	h.setUp(h.pickNamespaces(strings.TrimPrefix(h.ring, "ring-"), []string{a, b, c}, b, d))
	t.Logf("%d namespaces, %d shards; owners with 3 replicas: a %d, b %d, c %d", len(h.namespaces), shardCount,
		len(h.owned(a, []string{a, b, c})), len(h.owned(b, []string{a, b, c})), len(h.owned(c, []string{a, b, c})))

	replicas := map[string]*replica{a: h.start(a), b: h.start(b), c: h.start(c)}
	h.expectOwners("three replicas", []string{a, b, c})
	t.Logf("three replicas registered %d endpoints in %s", len(h.want), h.waitStore("three replicas"))

	// Kill b; its namespaces get a pod each while nobody owns them.
	members := []string{a, c}
	bNamespaces := h.owned(b, []string{a, b, c})
	replicas[b].Kill()
	killed := time.Now()
	for _, ns := range bNamespaces {
		h.addPod(ns)
	}
	h.expectOwners("b killed", members)
	took := time.Since(killed)
	conv := h.waitStore("b killed")
	t.Logf("b killed: its %d namespaces taken over %s after the kill (lease %s), store converged %s later",
		len(bNamespaces), took.Round(10*time.Millisecond), leaseDuration, conv.Round(10*time.Millisecond))
	if took < leaseDuration/2 {
		t.Errorf("b's shards taken over %s after the kill, before its lease (%s) could have expired", took, leaseDuration)
	}

	// Add d: a and c drain and hand it its shards; pods keep coming in its namespaces.
	members = []string{a, c, d}
	replicas[d] = h.start(d)
	dNamespaces := h.owned(d, members)
	for _, ns := range dNamespaces {
		h.addPod(ns)
	}
	took = h.expectOwners("d added", members)
	conv = h.waitStore("d added")
	t.Logf("d added: %d namespaces handed over within %s, store converged %s later", len(dNamespaces), took.Round(10*time.Millisecond), conv.Round(10*time.Millisecond))
	for _, ns := range dNamespaces { // d writes them
		h.addPod(ns)
	}
	h.waitStore("d writes its namespaces")

	// Stop c cleanly: it releases its shards and deletes its Lease, so the others take over
	// well before the lease would have expired; a pod of one of its namespaces becomes
	// unready and must be deregistered exactly once by the new owner.
	cNamespaces := h.owned(c, members)
	members = []string{a, d}
	stopped := time.Now()
	replicas[c].Stop(20 * time.Second)
	h.expectOwners("c stopped", members)
	t.Logf("c stopped cleanly: %d namespaces taken over %s after SIGTERM", len(cNamespaces), time.Since(stopped).Round(10*time.Millisecond))
	deleted := map[string]bool{}
	if len(cNamespaces) > 0 {
		ns := cNamespaces[0]
		pods := &corev1.PodList{}
		if err := k8s.List(h.ctx, pods, client.InNamespace(ns)); err != nil || len(pods.Items) == 0 {
			t.Fatalf("pods of %s: %v", ns, err)
		}
		pod := &pods.Items[0]
		h.setReady(pod, pod.Status.PodIP, false)
		key := h.prefix + "/" + service + "/" + ns + "/" + pod.Name
		h.mu.Lock()
		delete(h.want, key)
		h.mu.Unlock()
		deleted[key] = true
	}
	h.waitStore("c stopped")
	for id, r := range replicas {
		if id != b && id != c && r.Exited() != nil {
			t.Errorf("replica %s exited: %v", id, r.Exited())
		}
	}
	h.verify(deleted)
}
