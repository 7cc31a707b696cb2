package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	podwebhook "github.com/registrar-dev/registrar/internal/webhook"
	"github.com/registrar-dev/registrar/test/support/adsclient"
)

// The production-shaped scenario (issue 34): a cluster that looks like a real one, every
// feature on at once (--store-batch, --store-lease-ttl, the node Lease guard, the pod
// webhook, xDS with many clients, leader election), taken through a rolling update, a scale
// to 0 and back, the loss of a third of the nodes, a kill -9 mid-churn and a tenancy
// conflict. After each phase it waits (bounded) until every store key, every xDS client and
// every readiness gate is exact against the API server, and records how long that took; at
// the end the fault recorder's invariants judge the whole record of the store.
//
// `go test ./test/faults/` runs the short variant; FAULTS_FULL=1 the sizes.
// SCENARIO_SEEDS=1,2,3 runs one subtest per seed (default: SCENARIO_SEED, else a random
// seed, printed); SCENARIO_JSON=path writes the per-phase table (docs/bench envelope, see
// bench/benchdoc); SCENARIO_BIG_PODS overrides the big service's size.

// scenarioSize is the shape of the cluster.
type scenarioSize struct {
	BigPods       int `json:"big_pods"`
	SmallServices int `json:"small_services"`
	Namespaces    int `json:"namespaces"`
	Nodes         int `json:"nodes"`
	XDSClients    int `json:"xds_clients"`
}

func scenarioSizes(t *testing.T) (string, scenarioSize) {
	variant, s := "short", scenarioSize{BigPods: 300, SmallServices: 40, Namespaces: 8, Nodes: 6, XDSClients: 5}
	if full() {
		variant, s = "full", scenarioSize{BigPods: 2000, SmallServices: 300, Namespaces: 30, Nodes: 30, XDSClients: 20}
	}
	if v := os.Getenv("SCENARIO_BIG_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 {
			t.Fatalf("SCENARIO_BIG_PODS=%q: want a number of at least 4", v)
		}
		variant, s.BigPods = variant+fmt.Sprintf(" (big service %d pods)", n), n
	}
	return variant, s
}

func scenarioSeeds(t *testing.T) []uint64 {
	parse := func(v string) uint64 {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			t.Fatalf("seed %q: %v", v, err)
		}
		return n
	}
	if v := os.Getenv("SCENARIO_SEEDS"); v != "" {
		var out []uint64
		for f := range strings.SplitSeq(v, ",") {
			out = append(out, parse(f))
		}
		return out
	}
	if v := os.Getenv("SCENARIO_SEED"); v != "" {
		return []uint64{parse(v)}
	}
	return []uint64{rand.Uint64() % 1_000_000}
}

const (
	bigApp        = "big"
	sharedService = "shared"
	// scenarioLeaseTimeout is --node-lease-timeout, the Lease's own duration (startKubelets).
	scenarioLeaseTimeout = 10 * time.Second
	// podWorkers bounds the API calls the test makes at once.
	podWorkers = 8
)

func TestProductionScenario(t *testing.T) {
	requireSetup(t)
	variant, size := scenarioSizes(t)
	var runs []scenarioRun
	for _, seed := range scenarioSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("production scenario, %s variant, seed %d (SCENARIO_SEED=%d reruns it): %+v", variant, seed, seed, size)
			run := runProduction(t, seed, size)
			run.Variant, run.Passed = variant, !t.Failed()
			runs = append(runs, run)
			t.Logf("per-phase table (seed %d):\n%s", seed, run.table())
			report(result{fault: fmt.Sprintf("P. production scenario (%s, seed %d)", variant, seed), events: run.Events,
				violations: len(run.Violations), convergence: run.slowest(), note: run.note()})
		})
	}
	if path := os.Getenv("SCENARIO_JSON"); path != "" && len(runs) > 0 {
		if err := writeScenarioEnvelope(path, runs); err != nil {
			t.Errorf("write %s: %v", path, err)
		} else {
			t.Logf("wrote %s", path)
		}
	}
}

// prodReg is one ServiceRegistry of the scenario and the pods the test made for it.
type prodReg struct {
	ns, name, service, app string
	reg                    *v1beta1.ServiceRegistry
	world                  *world
	// refusedBy is "namespace/name" of the registry that owns the service name when this
	// one must be refused (tenancy); "" otherwise.
	refusedBy string
	base      int // node placement offset

	mu      sync.Mutex
	pods    map[string]*corev1.Pod
	next    int
	version int // the big service's pod template version
}

func (r *prodReg) key() string      { return r.ns + "/" + r.name }
func (r *prodReg) xdsName() string  { return r.service + "." + r.ns }
func (r *prodReg) storeDir() string { return fmt.Sprintf("%s/%s/%s/", prefix, r.service, r.ns) }

// livePods is the pods the test created and did not delete, by name.
func (r *prodReg) livePods() []*corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// prod is one run of the scenario.
type prod struct {
	t     *testing.T
	ctx   context.Context
	seed  uint64
	rnd   *rand.Rand
	size  scenarioSize
	label string // the scenario's namespaces carry registrar.dev/scenario=label

	store   *clientv3.Client
	rec     *recorder
	foreign map[string]string
	nss     []string
	kl      *kubelets

	mu       sync.Mutex
	lost     map[string]bool // nodes whose Lease the test stopped renewing
	faultEnd time.Time

	regs    []*prodReg
	big     *prodReg
	op      *operator
	xdsAddr string
	clients []*adsclient.Client
	ipNext  atomic.Int64

	phases []phaseResult
}

func runProduction(t *testing.T, seed uint64, size scenarioSize) scenarioRun {
	started := time.Now()
	p := newProd(t, seed, size)
	run := scenarioRun{Seed: seed, Sizes: size, SetupSeconds: time.Since(started).Seconds()}
	t.Logf("set up in %s: store, %d nodes, %d namespaces, %d registries, the operator serving its webhook, %d xDS clients",
		time.Since(started).Round(100*time.Millisecond), size.Nodes, size.Namespaces, len(p.regs), size.XDSClients)

	// 1. Initial registration: every registry and its pods, the big service's included.
	p.phase("initial registration", 0, p.initialPods)
	p.checkWebhookInjected()

	// 2. Rolling update of the big service, maxSurge 25 %, maxUnavailable 0.
	p.phase("rolling update (maxSurge 25%)", 0, p.rollingUpdate)

	// 3. Scale to 0 and back.
	p.phase("scale to 0", 0, func() time.Time { return p.scaleBig(0) })
	p.phase("scale back", 0, func() time.Time { return p.scaleBig(size.BigPods) })

	// 4. A third of the nodes stop renewing their Leases (timed from the Leases' lapse); then
	// those Nodes and their Leases are deleted: the dead pods must stay out, also after the
	// operator's restart in phase 5.
	p.phase("node Lease loss (1/3 of the nodes)", 0, p.loseNodes)
	p.phase("lost Nodes and their Leases deleted", 5*time.Second, p.deleteLostNodes)

	// 5. kill -9 of the operator in the middle of churn across every namespace; restart.
	p.phase("kill -9 mid-churn, restart", 0, p.killMidChurn)

	// 6. Tenancy: a registry in another namespace claims the owner's service name.
	p.phase("tenancy conflict", 5*time.Second, p.tenancyConflict)

	time.Sleep(time.Second) // let the recorder's watch deliver the last events (its lag is not under test)
	run.Violations = p.verifyInvariants()
	for _, c := range p.clients {
		if snap := c.Snapshot(); snap.Nacks > 0 {
			run.Violations = append(run.Violations, fmt.Sprintf("xDS client %s rejected %d responses as grpc-go's client would (last: %v)",
				snap.Node, snap.Nacks, snap.LastNack))
		}
	}
	for _, v := range run.Violations {
		t.Errorf("invariant violation: %s", truncate(v, 600))
	}
	run.Events = len(p.rec.snapshot())
	run.Phases = p.phases
	run.Seconds = time.Since(started).Seconds()
	return run
}

// newProd starts the store, its recorder, the nodes, the namespaces and registries, the
// webhook configuration, the operator and the xDS clients.
func newProd(t *testing.T, seed uint64, size scenarioSize) *prod {
	t.Helper()
	// The full variant outlasts testCtx's 10 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	t.Cleanup(cancel)
	p := &prod{t: t, ctx: ctx, seed: seed, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), size: size,
		lost: map[string]bool{}}
	p.label = fmt.Sprintf("s%d-%d", seed, time.Now().UnixNano()%1_000_000)
	srv := startStore(t)
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	p.store = cli

	for i := range size.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("prod-t%02d-", i),
			Labels: map[string]string{"registrar.dev/scenario": p.label, "tenant": fmt.Sprintf("tenant-%02d", i)}}}
		if err := k8s.Create(p.ctx, ns); err != nil {
			t.Fatalf("create namespace: %v", err)
		}
		p.nss = append(p.nss, ns.Name)
	}
	leaderNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "prod-system-"}}
	if err := k8s.Create(p.ctx, leaderNS); err != nil {
		t.Fatalf("create namespace: %v", err)
	}

	// Foreign keys: another installation's endpoint beside the big service's, and keys
	// outside the operator's services; never to be touched.
	p.foreign = map[string]string{
		fmt.Sprintf("%s/%s/%s/foreign", prefix, bigApp, p.nss[0]): `{"service":"big","pod":"foreign","owner":"another-installation"}`,
		fmt.Sprintf("%s/unmanaged/%s/x", prefix, p.nss[0]):        `{"service":"unmanaged","pod":"x","owner":"someone"}`,
		"/elsewhere/" + p.label:                                   "untouched",
	}
	var rev int64
	for k, v := range p.foreign {
		resp, err := cli.Put(p.ctx, k, v)
		if err != nil {
			t.Fatalf("seed %s: %v", k, err)
		}
		rev = max(rev, resp.Header.Revision)
	}
	p.rec = record(t, cli, rev)
	p.kl = startKubelets(t, p.ctx, size.Nodes)

	// The registries: the big service in the first namespace, the small ones spread over
	// every namespace, the tenancy pair's owner in the second.
	p.big = p.addRegistry(p.nss[0], bigApp, "", bigApp)
	p.big.version = 1
	for i := range size.SmallServices {
		app := fmt.Sprintf("svc-%03d", i)
		p.addRegistry(p.nss[i%len(p.nss)], app, "", app)
	}
	p.addRegistry(p.nss[1%len(p.nss)], sharedService, sharedService, sharedService)

	// The webhook, served by the operator at a local port with its self-signed CA, which
	// it injects into this configuration; only the scenario's namespaces go through it.
	webhookPort := freePort(t)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "registrar-scenario-" + p.label},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mpod.registrar.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", webhookPort, podwebhook.Path))},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"registrar.dev/scenario": p.label}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
		}},
	}
	if err := k8s.Create(p.ctx, mwc); err != nil {
		t.Fatalf("create MutatingWebhookConfiguration: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), mwc) })

	p.xdsAddr = freeAddr(t, "127.0.0.1")
	cfg := operatorConfig{store: srv.Endpoint(), prefix: prefix, leaderNamespace: leaderNS.Name, extra: []string{
		"--store-batch=true", "--store-lease-ttl=30s", "--node-lease-timeout=" + scenarioLeaseTimeout.String(),
		"--enable-webhook=true", fmt.Sprintf("--webhook-port=%d", webhookPort), "--webhook-cert-dir=" + filepath.Join(t.TempDir(), "certs"),
		"--webhook-self-signed-hosts=127.0.0.1", "--webhook-ca-inject=" + mwc.Name,
		"--xds-bind-address=" + p.xdsAddr, "--zap-log-level=error",
	}}
	p.op = startOperator(t, "registrar", cfg)
	// Pods are created once the webhook serves with its CA injected (its failurePolicy is
	// Ignore, as shipped: pods created before would silently go without the gate).
	if !waitFor(2*time.Minute, func() bool {
		cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := k8s.Get(p.ctx, client.ObjectKeyFromObject(mwc), cur); err != nil || len(cur.Webhooks[0].ClientConfig.CABundle) == 0 {
			return false
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", webhookPort), time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}) {
		t.Fatalf("the operator's webhook did not serve with its CA injected within 2 minutes")
	}

	names := make([]string, 0, len(p.regs)+1)
	for _, r := range p.regs {
		names = append(names, r.xdsName())
	}
	names = append(names, sharedService+"."+p.nss[2%len(p.nss)]) // the tenancy conflict's registry, created later
	cctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for i := range size.XDSClients {
		c, err := adsclient.Start(cctx, p.xdsAddr, fmt.Sprintf("scenario-client-%02d", i), names)
		if err != nil {
			t.Fatal(err)
		}
		p.clients = append(p.clients, c)
	}
	t.Cleanup(p.cleanup)
	return p
}

// addRegistry creates a registry with injection enabled, selecting app=app, port grpc 8080.
func (p *prod) addRegistry(ns, name, serviceName, app string) *prodReg {
	p.t.Helper()
	reg := &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.ServiceRegistrySpec{
			ServiceName: serviceName,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Ports:       []v1beta1.ServicePort{{Name: "grpc", Port: 8080}},
			Injection:   &v1beta1.InjectionSpec{Enabled: ptr.To(true)},
		},
	}
	if err := k8s.Create(p.ctx, reg); err != nil {
		p.t.Fatalf("create ServiceRegistry %s/%s: %v", ns, name, err)
	}
	r := &prodReg{ns: ns, name: name, service: reg.ResolvedServiceName(), app: app, reg: reg, world: newWorld(),
		pods: map[string]*corev1.Pod{}, base: p.rnd.IntN(p.size.Nodes)}
	p.regs = append(p.regs, r)
	return r
}

// cleanup stops the operator and removes the registries (finalizers and all) and the pods,
// so that the suite's next operators neither write them nor cache thousands of pods.
func (p *prod) cleanup() {
	p.op.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, r := range p.regs {
		cur := &v1beta1.ServiceRegistry{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(r.reg), cur); err == nil {
			cur.Finalizers = nil
			_ = k8s.Update(ctx, cur)
			_ = k8s.Delete(ctx, cur)
		}
	}
	for _, ns := range p.nss {
		_ = k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
	}
}

// parallel runs fn(i) for i in [0, n) on podWorkers goroutines.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(n, podWorkers) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// retry runs op until it succeeds (conflicts with the operator's gate writes, a restarting
// webhook), for up to a minute; it reports the last error.
func (p *prod) retry(what string, op func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := op()
		if err == nil || time.Now().After(deadline) || p.ctx.Err() != nil {
			if err != nil {
				p.t.Errorf("%s: %v", what, err)
			}
			return err
		}
		time.Sleep(100 * time.Millisecond) // retry pacing
	}
}

// nodeFor places a registry's j-th pod: consecutive nodes from the registry's offset, so
// that a small service (at most 5 pods) has at most 2 pods on the lost third (every node
// whose index is a multiple of 3) and the node Lease guard has no reason to hold its
// removals; once nodes are lost, only live nodes.
func (p *prod) nodeFor(r *prodReg, j int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var live []string
	for _, n := range p.kl.nodes {
		if !p.lost[n] {
			live = append(live, n)
		}
	}
	return live[(r.base+j)%len(live)]
}

// addPod creates the registry's next pod on its node and plays the kubelet: Running, an IP,
// containers ready. It returns false when the pod could not be created.
func (p *prod) addPod(r *prodReg) bool { return p.addPodAt(r, "") }

// addPodAt is addPod with the pod's IP ("": a new one).
func (p *prod) addPodAt(r *prodReg, ip string) bool {
	r.mu.Lock()
	j := r.next
	r.next++
	name := fmt.Sprintf("%s-%d", r.app, j)
	if r == p.big {
		name = fmt.Sprintf("%s-v%d-%d", r.app, r.version, j)
	}
	r.mu.Unlock()
	if ip == "" {
		n := p.ipNext.Add(1)
		ip = fmt.Sprintf("10.%d.%d.%d", n/65536%256, n/256%256, n%256)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name, Labels: map[string]string{"app": r.app}},
		Spec: corev1.PodSpec{NodeName: p.nodeFor(r, j),
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1", Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 8080}}}}},
	}
	if err := p.retry("create pod "+r.ns+"/"+name, func() error {
		err := k8s.Create(p.ctx, pod)
		if apierrors.IsAlreadyExists(err) {
			return k8s.Get(p.ctx, client.ObjectKeyFromObject(pod), pod)
		}
		return err
	}); err != nil {
		return false
	}
	r.world.eligible(name, string(pod.UID))
	if p.retry("ready pod "+r.ns+"/"+name, func() error { return kubeletStatus(p.ctx, pod, ip, true) }) != nil {
		return false
	}
	pod.Status.PodIP = ip
	r.mu.Lock()
	r.pods[name] = pod
	r.mu.Unlock()
	return true
}

// kubeletStatus writes the kubelet's part of a pod's status: Running, the IP (when set) and
// ContainersReady and Ready, keeping the other conditions (the readiness gate registrar
// writes), as the kubelet does.
func kubeletStatus(ctx context.Context, pod *corev1.Pod, ip string, ready bool) error {
	cur := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		return err
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	cur.Status.Phase = corev1.PodRunning
	if ip != "" {
		cur.Status.PodIP, cur.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	conds := slices.DeleteFunc(slices.Clone(cur.Status.Conditions), func(c corev1.PodCondition) bool {
		return c.Type == corev1.ContainersReady || c.Type == corev1.PodReady
	})
	cur.Status.Conditions = append(conds,
		corev1.PodCondition{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: now})
	return k8s.Status().Update(ctx, cur)
}

// deletePod deletes a pod at once (envtest has no kubelet to wait for).
func (p *prod) deletePod(r *prodReg, pod *corev1.Pod) {
	r.world.ineligible(pod.Name)
	_ = p.retry("delete pod "+r.ns+"/"+pod.Name, func() error {
		return client.IgnoreNotFound(k8s.Delete(p.ctx, pod, client.GracePeriodSeconds(0)))
	})
	r.mu.Lock()
	delete(r.pods, pod.Name)
	r.mu.Unlock()
}

// terminate deletes a pod with a grace period: it stays, terminating, until deletePod
// plays the kubelet's final deletion.
func (p *prod) terminate(r *prodReg, pod *corev1.Pod) {
	r.world.ineligible(pod.Name)
	_ = p.retry("delete pod "+r.ns+"/"+pod.Name+" (grace period)", func() error {
		return client.IgnoreNotFound(k8s.Delete(p.ctx, pod, client.GracePeriodSeconds(30)))
	})
}

// unready makes a pod's containers unready.
func (p *prod) unready(r *prodReg, pod *corev1.Pod) {
	r.world.ineligible(pod.Name)
	_ = p.retry("unready pod "+r.ns+"/"+pod.Name, func() error { return kubeletStatus(p.ctx, pod, "", false) })
}

// initialPods creates every registry's pods: the big service's and 1–5 for each other.
func (p *prod) initialPods() time.Time {
	type job struct{ r *prodReg }
	var jobs []job
	for range p.size.BigPods {
		jobs = append(jobs, job{p.big})
	}
	for _, r := range p.regs[1:] {
		for range 1 + p.rnd.IntN(5) {
			jobs = append(jobs, job{r})
		}
	}
	p.rnd.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	parallel(len(jobs), func(i int) { p.addPod(jobs[i].r) })
	return time.Now()
}

// checkWebhookInjected fails the run when the webhook gated none of the big service's pods.
func (p *prod) checkWebhookInjected() {
	gated := 0
	pods, err := apiPods(p.ctx, p.big.ns)
	if err != nil {
		p.t.Errorf("list pods: %v", err)
		return
	}
	total := 0
	for _, pod := range pods {
		if pod.Labels["app"] != p.big.app {
			continue
		}
		total++
		if hasGate(&pod) {
			gated++
		}
	}
	p.t.Logf("webhook: %d of %d pods of the big service carry the readiness gate", gated, total)
	if gated == 0 {
		p.t.Errorf("the webhook injected the readiness gate into none of the big service's %d pods", total)
	}
}

// rollingUpdate replaces every pod of the big service as the Deployment controller does
// with maxSurge 25 % and maxUnavailable 0: a quarter more new pods, ready, then as many old
// ones deleted, until none is left. Old pods are deleted with a grace period: they stay,
// terminating (DRAINING over xDS), until the next batch is up; the kubelet gives the next
// batch the addresses their stopped containers released, then deletes them.
func (p *prod) rollingUpdate() time.Time {
	old := p.big.livePods()
	p.big.mu.Lock()
	p.big.version++
	p.big.next = 0
	p.big.mu.Unlock()
	surge := max(1, (len(old)+3)/4)
	var terminating []*corev1.Pod
	for len(old) > 0 {
		n := min(surge, len(old))
		parallel(n, func(i int) {
			ip := ""
			if i < len(terminating) {
				ip = terminating[i].Status.PodIP
			}
			p.addPodAt(p.big, ip)
		})
		parallel(len(terminating), func(i int) { p.deletePod(p.big, terminating[i]) })
		terminating = old[:n]
		old = old[n:]
		parallel(len(terminating), func(i int) { p.terminate(p.big, terminating[i]) })
	}
	parallel(len(terminating), func(i int) { p.deletePod(p.big, terminating[i]) })
	return time.Now()
}

// scaleBig deletes the big service's pods down to n or creates new ones up to n.
func (p *prod) scaleBig(n int) time.Time {
	cur := p.big.livePods()
	if len(cur) > n {
		gone := cur[n:]
		parallel(len(gone), func(i int) { p.deletePod(p.big, gone[i]) })
	} else {
		parallel(n-len(cur), func(int) { p.addPod(p.big) })
	}
	return time.Now()
}

// loseNodes stops the Lease renewals of every third node (index 0, 3, 6, …): their pods
// become ineligible. It returns the latest last renewal of those nodes.
func (p *prod) loseNodes() time.Time {
	var lost []string
	for i, n := range p.kl.nodes {
		if i%3 == 0 {
			lost = append(lost, n)
		}
	}
	p.mu.Lock()
	for _, n := range lost {
		p.lost[n] = true
	}
	p.mu.Unlock()
	last := make([]time.Time, len(lost))
	var wg sync.WaitGroup
	for i, n := range lost {
		wg.Go(func() { last[i] = p.kl.stop(n) })
	}
	wg.Wait()
	lapse := map[string]time.Time{}
	from := last[0]
	for i, n := range lost {
		lapse[n] = last[i].Add(scenarioLeaseTimeout)
		if last[i].After(from) {
			from = last[i]
		}
	}
	// A lost node's pods stop being eligible when its Lease lapses.
	for _, r := range p.regs {
		for _, pod := range r.livePods() {
			if at, ok := lapse[pod.Spec.NodeName]; ok {
				r.world.ineligibleSince(pod.Name, at)
			}
		}
	}
	from = from.Add(scenarioLeaseTimeout)
	p.t.Logf("node Lease loss: %d of %d nodes stopped renewing; the last of their Leases lapses at %s", len(lost), len(p.kl.nodes), from.Format("15:04:05.000"))
	return from
}

func (p *prod) isLost(node string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost[node]
}

// deleteLostNodes deletes the lost nodes' Leases and Node objects, as when dead Nodes are
// removed (their Leases go with them; their pods stay until the pod garbage collector, which
// envtest does not run, removes them): those pods must stay out.
func (p *prod) deleteLostNodes() time.Time {
	for _, n := range p.kl.nodes {
		if !p.isLost(n) {
			continue
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: n}}
		if err := client.IgnoreNotFound(k8s.Delete(p.ctx, lease)); err != nil {
			p.t.Errorf("delete the Lease of node %s: %v", n, err)
		}
		if err := client.IgnoreNotFound(k8s.Delete(p.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})); err != nil {
			p.t.Errorf("delete node %s: %v", n, err)
		}
	}
	return time.Now()
}

// killMidChurn churns pods in every namespace (a tenth of the big service replaced, small
// services' pods made unready, replaced or added), kills the operator with SIGKILL in the
// middle, goes on churning while it is down, and starts it again: the phase's time is
// measured from the restart (which includes waiting out the dead leader's Lease).
func (p *prod) killMidChurn() time.Time {
	type step func()
	var steps []step
	live := p.big.livePods()
	var bigEligible []*corev1.Pod
	for _, pod := range live {
		if !p.isLost(pod.Spec.NodeName) {
			bigEligible = append(bigEligible, pod)
		}
	}
	p.rnd.Shuffle(len(bigEligible), func(i, j int) { bigEligible[i], bigEligible[j] = bigEligible[j], bigEligible[i] })
	for _, pod := range bigEligible[:max(1, len(bigEligible)/10)] {
		steps = append(steps, func() { p.addPod(p.big); p.deletePod(p.big, pod) })
	}
	for _, r := range p.regs[1:] {
		pods := r.livePods()
		switch p.rnd.IntN(4) {
		case 0:
			if len(pods) > 0 {
				pod := pods[p.rnd.IntN(len(pods))]
				steps = append(steps, func() { p.unready(r, pod) })
			}
		case 1:
			if len(pods) > 0 {
				pod := pods[p.rnd.IntN(len(pods))]
				steps = append(steps, func() { p.addPod(r); p.deletePod(r, pod) })
			}
		case 2:
			steps = append(steps, func() { p.addPod(r) })
		}
	}
	p.rnd.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	half := len(steps) / 2
	parallel(half, func(i int) { steps[i]() })
	p.op.Kill()
	killed := time.Now()
	rest := steps[half:]
	parallel(len(rest), func(i int) { rest[i]() })
	if d := 2*time.Second - time.Since(killed); d > 0 {
		time.Sleep(d) // scenario pacing: the operator stays down at least 2 s
	}
	p.op.start()
	p.mu.Lock()
	p.faultEnd = time.Now()
	p.mu.Unlock()
	p.t.Logf("kill -9: operator down %s while %d of %d churn steps ran", time.Since(killed).Round(time.Millisecond), len(rest), len(steps))
	return p.faultEnd
}

// tenancyConflict creates, in another namespace, a registry claiming the service name the
// registry "shared" owns, with pods of its own: it must be refused with a condition naming
// the owner, and none of its pods may join the owner's service.
func (p *prod) tenancyConflict() time.Time {
	var owner *prodReg
	for _, r := range p.regs {
		if r.name == sharedService {
			owner = r
		}
	}
	ns := p.nss[2%len(p.nss)]
	r := p.addRegistry(ns, "claims-shared", sharedService, "claims-shared")
	r.refusedBy = owner.key()
	for range 3 {
		p.addPod(r)
	}
	return time.Now()
}

// freePort is a port the kernel just handed out on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t, "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return n
}

func hasGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == v1beta1.ReadinessGate {
			return true
		}
	}
	return false
}
