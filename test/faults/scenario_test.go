package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
)

const (
	prefix  = "/registrar/services"
	service = "web"
	// grace is the invariant (a) window after a pod became ineligible, or after a fault
	// that kept the operator from writing ended, on a loaded shared machine.
	grace = 15 * time.Second
	// convergeLimit fails a test; the measured time is what the summary reports.
	convergeLimit = 60 * time.Second
)

// scenario is one test's namespace, store, ServiceRegistry, pods and store recording.
type scenario struct {
	t        *testing.T
	ctx      context.Context
	ns       string
	store    *clientv3.Client
	storeURL string
	world    *world
	rec      *recorder
	reg      *v1beta1.ServiceRegistry
	checks   checks

	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	next     int
	faultEnd time.Time // when the fault that stopped writes ended; zero while none
}

// newScenario seeds foreign keys in the store at endpoints, starts recording it, and creates
// the namespace and its ServiceRegistry "web" (app=web, port http 8080).
func newScenario(t *testing.T, endpoints []string) *scenario {
	t.Helper()
	requireSetup(t)
	s := &scenario{t: t, ctx: testCtx(t), world: newWorld(), pods: map[string]*corev1.Pod{}, storeURL: strings.Join(endpoints, ",")}
	// The operator's client settings: gRPC's default reconnect backoff (up to 120 s) would
	// make this client, not the operator, slow to see the store return.
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	s.store = cli
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "faults-"}}
	if err := k8s.Create(s.ctx, nsObj); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	s.ns = nsObj.Name
	svcPrefix := fmt.Sprintf("%s/%s/%s/", prefix, service, s.ns)
	foreign := map[string]string{
		svcPrefix + "foreign":                      `{"service":"web","pod":"foreign","owner":"another-installation"}`,
		svcPrefix + "garbage":                      "not json at all",
		fmt.Sprintf("%s/other/%s/x", prefix, s.ns): `{"service":"other","pod":"x","owner":"someone"}`,
		"/elsewhere/" + s.ns:                       "untouched",
	}
	var rev int64
	for k, v := range foreign {
		resp, err := cli.Put(s.ctx, k, v)
		if err != nil {
			t.Fatalf("seed %s: %v", k, err)
		}
		rev = max(rev, resp.Header.Revision)
	}
	s.rec = record(t, cli, rev)
	s.reg = &v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: service},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": service}},
			Ports:    []v1beta1.ServicePort{{Name: "http", Port: 8080}},
		},
	}
	if err := k8s.Create(s.ctx, s.reg); err != nil {
		t.Fatalf("create ServiceRegistry: %v", err)
	}
	t.Cleanup(s.deleteRegistry) // runs after the test's operators are gone (cleanups run last-in first-out)
	s.checks = checks{
		world: s.world, servicePrefix: svcPrefix, ownedPrefix: prefix + "/" + etcdstore.FenceDir + "/",
		owner: string(s.reg.UID), foreign: foreign, window: s.window,
		service: service, ports: map[string]int32{"http": 8080}, namespace: s.ns,
	}
	return s
}

// deleteRegistry removes the test's ServiceRegistry, finalizer and all, so that the next
// test's operator (which watches every namespace) does not write it into its store.
func (s *scenario) deleteRegistry() { s.forceDelete(s.reg) }

// forceDelete deletes a ServiceRegistry without waiting for an operator's finalizer.
func (s *scenario) forceDelete(obj *v1beta1.ServiceRegistry) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.retry("delete ServiceRegistry", func() error {
		reg := &v1beta1.ServiceRegistry{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), reg); err != nil {
			return client.IgnoreNotFound(err)
		}
		reg.Finalizers = nil
		if err := k8s.Update(ctx, reg); err != nil {
			return err
		}
		return client.IgnoreNotFound(k8s.Delete(ctx, reg))
	})
}

// window is invariant (a)'s deadline for a pod that became ineligible at: grace after at,
// or after the end of the fault when the pod became ineligible before the fault ended.
func (s *scenario) window(at time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faultEnd.After(at) {
		return s.faultEnd.Add(grace)
	}
	return at.Add(grace)
}

// quiet brackets a fault that keeps the store from committing (stopped, quorum lost): call
// it just before the fault; it returns the store's revision, up to which the record is
// complete, and a function to call just before the store can commit again. Events the
// record replays after the fault are then known to have happened after that moment.
func (s *scenario) quiet() (storeCanCommit func()) {
	s.t.Helper()
	rev, err := s.rec.pause(s.ctx, s.store)
	if err != nil {
		s.t.Fatalf("recorder: %v", err)
	}
	return func() { s.rec.quietSince(rev, time.Now()) }
}

// faultEnded marks the end of a fault during which the operator could not write.
func (s *scenario) faultEnded() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultEnd = time.Now()
	return s.faultEnd
}

func (s *scenario) operatorConfig() operatorConfig {
	return operatorConfig{store: s.storeURL, prefix: prefix}
}

// retry runs op until it succeeds (the API server may be restarting), for up to a minute.
func (s *scenario) retry(what string, op func() error) {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := op()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond) // retry pacing against an unavailable API server
	}
}

// addReady creates pod web-N and plays the kubelet: Running, an IP, ready.
func (s *scenario) addReady() string {
	s.t.Helper()
	return s.addReadyOn("")
}

// addReadyOn creates pod web-N on node (spec.nodeName set at creation; "" leaves it
// unscheduled) and plays the kubelet: Running, an IP, ready.
func (s *scenario) addReadyOn(node string) string {
	s.t.Helper()
	s.mu.Lock()
	s.next++
	n := s.next
	s.mu.Unlock()
	name := fmt.Sprintf("web-%d", n)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name, Labels: map[string]string{"app": service}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	s.retry("create pod "+name, func() error {
		err := k8s.Create(s.ctx, pod)
		if apierrors.IsAlreadyExists(err) {
			return k8s.Get(s.ctx, client.ObjectKeyFromObject(pod), pod)
		}
		return err
	})
	s.world.eligible(name, string(pod.UID))
	s.retry("ready pod "+name, func() error {
		return setReady(s.ctx, pod, fmt.Sprintf("10.%d.%d.%d", n/65536%256, n/256%256, n%256), true)
	})
	s.mu.Lock()
	s.pods[name] = pod
	s.mu.Unlock()
	return name
}

// setReady writes the kubelet's part of the pod status.
func setReady(ctx context.Context, pod *corev1.Pod, ip string, ready bool) error {
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
	cur.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
	}
	return k8s.Status().Update(ctx, cur)
}

// oldestEligible is the eligible pod with the lowest number, or "".
func (s *scenario) oldestEligible() string {
	d := s.world.desired()
	best, bestN := "", -1
	for _, name := range d {
		var n int
		_, _ = fmt.Sscanf(name, "web-%d", &n)
		if bestN < 0 || n < bestN {
			best, bestN = name, n
		}
	}
	return best
}

// unready makes a pod's containers unready.
func (s *scenario) unready(name string) {
	s.t.Helper()
	s.mu.Lock()
	pod := s.pods[name]
	s.mu.Unlock()
	s.world.ineligible(name)
	s.retry("unready pod "+name, func() error { return setReady(s.ctx, pod, "", false) })
}

// remove deletes a pod (at once: envtest has no kubelet, and the pod has no node).
func (s *scenario) remove(name string) {
	s.t.Helper()
	s.mu.Lock()
	pod := s.pods[name]
	s.mu.Unlock()
	s.world.ineligible(name)
	s.retry("delete pod "+name, func() error {
		return client.IgnoreNotFound(k8s.Delete(s.ctx, pod, client.GracePeriodSeconds(0)))
	})
}

// churn runs steps of pod churn, one every `every`: two pods added for each one that
// leaves (alternately unready and deleted). It returns when done.
func (s *scenario) churn(steps int, every time.Duration) {
	s.t.Helper()
	for i := range steps {
		switch i % 3 {
		case 2:
			if name := s.oldestEligible(); name != "" {
				if i%2 == 0 {
					s.unready(name)
				} else {
					s.remove(name)
				}
			}
		default:
			s.addReady()
		}
		time.Sleep(every) // pacing of the churn, not synchronisation
	}
}

// churnInBackground runs churn in a goroutine; the returned function waits for it.
func (s *scenario) churnInBackground(steps int, every time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil { // t.Fatal from a goroutine: report, don't hang
				s.t.Errorf("churn: %v", r)
			}
		}()
		s.churn(steps, every)
	}()
	return func() { <-done }
}

// converge waits until the store holds exactly the eligible pods and returns how long it
// took since `since`; it fails the test after convergeLimit.
func (s *scenario) converge(since time.Time) time.Duration {
	s.t.Helper()
	deadline := time.Now().Add(convergeLimit)
	var got []string
	for time.Now().Before(deadline) {
		var err error
		got, err = servicePods(s.ctx, s.store, s.checks.servicePrefix, s.checks.foreign)
		if err == nil && equal(got, s.world.desired()) {
			return time.Since(since)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	s.t.Fatalf("store did not converge within %s: holds %v, eligible %v", convergeLimit, got, s.world.desired())
	return 0
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// storeSynced reads the registry's StoreSynced condition.
func (s *scenario) storeSynced() *metav1.Condition {
	reg := &v1beta1.ServiceRegistry{}
	if err := k8s.Get(s.ctx, client.ObjectKeyFromObject(s.reg), reg); err != nil {
		return nil
	}
	return meta.FindStatusCondition(reg.Status.Conditions, v1beta1.ConditionStoreSynced)
}

// waitFor polls cond up to d; false when it never held.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	return cond()
}

// fenceHolder is the pid in the value of the installation's fence key ("host_pid_nanos"),
// 0 when unset.
func (s *scenario) fenceHolder(name string) int {
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	resp, err := s.store.Get(ctx, fence.Key(prefix, name))
	if err != nil || len(resp.Kvs) == 0 {
		return 0
	}
	parts := strings.Split(string(resp.Kvs[0].Value), "_")
	var pid int
	if len(parts) >= 3 {
		_, _ = fmt.Sscanf(parts[len(parts)-2], "%d", &pid)
	}
	return pid
}

// finish checks the invariants and reports the test's summary row.
func (s *scenario) finish(fault string, convergence time.Duration, note string) {
	s.t.Helper()
	time.Sleep(time.Second) // let the recorder's watch deliver the last events (its lag is not under test)
	violations := s.checks.verify(s.ctx, s.store, s.rec)
	events := s.rec.snapshot()
	for _, v := range violations {
		s.t.Errorf("invariant violation: %s", v)
	}
	replayed := 0
	for _, ev := range events {
		if ev.replayed {
			replayed++
		}
	}
	if replayed > 0 {
		s.t.Logf("%d of %d store events were replays after a broken or silent watch (stamped with an interval)", replayed, len(events))
	}
	if errs := s.rec.watchErrors(); len(errs) > 0 {
		s.t.Logf("the recorder's watch broke and was resumed %d times (no gaps: a gap is a violation): %v", len(errs), errs)
	}
	s.t.Logf("%s: %d store events, %d violations, convergence %s; %s", fault, len(events), len(violations), convergence, note)
	report(result{fault: fault, events: len(events), violations: len(violations), convergence: convergence, note: note})
}
