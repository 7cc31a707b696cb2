//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// The comparison: every setup runs the same demo app (3 replicas) on the same cluster, at
// the same time, each in its own namespace, with the same callers: 50 req/s round robin
// over what the setup's discovery source lists, once without and once with a retry on
// another instance. Each scenario starts fresh Deployments, applies its fault to every setup
// at (nearly) the same instant and records, per setup, failed requests, when the caller
// stopped picking the faulted address and whether it came back.
//
// Every peer is configured as its users are told to run it (docs/e2e.md has the sources):
//   - registrar: injected gate, 5-request warm-up, 5 s drain (preStop sleep).
//   - EndpointSlice: a preStop sleep of the same 5 s, as the Kubernetes docs and ingress
//     controllers recommend; the caller follows ready endpoints, as kube-proxy does.
//   - TTL self-registration: deregisters on SIGTERM and keeps serving for the same 5 s, as
//     Eureka's and Spring Cloud Consul's clients do on graceful shutdown; once with a short
//     lease (15 s TTL, 5 s renew) and once with Eureka's defaults (30 s renew, 90 s expiry).
//
// E2E_SETUPS (comma-separated ids) limits the setups (CI runs "registrar");
// E2E_RESULTS names a file the run's raw results are written to as JSON.

const (
	drainSeconds = 5  // registrar's drain, the EndpointSlice preStop sleep and the TTL app's grace
	hangFor      = 15 // seconds a hung process hangs; liveness (30 s) does not restart it first
	crashRepeats = 2  // crashes after restarts in the crash loop (after the first)
	crashVolume  = "/scratch"
)

type setup struct {
	id, name string
	deploy   func(ns string) *appsv1.Deployment
	targets  func(ctx context.Context, ns string) *targetSet
}

func ttlArgs(ns string, ttl, renew string) []string {
	if storeServer == nil {
		Fail("the TTL setups register into the host etcd: run them with E2E_STORE=host (E2E_SETUPS=registrar with the bundled store)")
	}
	return []string{
		"--self-register-etcd=" + storeServer.Endpoint(),
		"--self-register-prefix=/ttl/services/" + ns,
		"--self-register-ttl=" + ttl, "--self-register-keepalive=" + renew,
		"--self-register-deregister-on-sigterm",
		fmt.Sprintf("--shutdown-grace=%ds", drainSeconds),
	}
}

func ttlTargets(ctx context.Context, ns string) *targetSet {
	return watchStore(ctx, "/ttl/services/"+ns+"/", selfRegisteredAddress)
}

var allSetups = []setup{
	{
		id: "registrar", name: "registrar (gate + warm-up + 5 s drain)",
		deploy: func(ns string) *appsv1.Deployment {
			return comparisonDeployment(ns, registrarAnnotations("demo"), nil, false)
		},
		targets: func(ctx context.Context, ns string) *targetSet {
			return watchStore(ctx, "/registrar/services/demo/"+ns+"/", registrarAddress)
		},
	},
	{
		id: "endpointslice", name: "EndpointSlice (readiness probe + 5 s preStop sleep)",
		deploy: func(ns string) *appsv1.Deployment {
			return comparisonDeployment(ns, nil, nil, true)
		},
		targets: func(ctx context.Context, ns string) *targetSet {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "demo"},
					Ports: []corev1.ServicePort{{Port: demoPort, TargetPort: intstr.FromInt32(demoPort)}}},
			}
			Expect(k8s.Create(ctx, svc)).To(Succeed())
			return watchEndpointSlices(ctx, ns, "demo", demoPort)
		},
	},
	{
		id: "ttl", name: "TTL self-registration (15 s TTL, 5 s renew, deregister on SIGTERM)",
		deploy: func(ns string) *appsv1.Deployment {
			return comparisonDeployment(ns, nil, ttlArgs(ns, "15s", "5s"), false)
		},
		targets: ttlTargets,
	},
	{
		id: "ttl-eureka", name: "TTL self-registration, Eureka defaults (90 s expiry, 30 s renew, deregister on SIGTERM)",
		deploy: func(ns string) *appsv1.Deployment {
			return comparisonDeployment(ns, nil, ttlArgs(ns, "90s", "30s"), false)
		},
		targets: ttlTargets,
	},
}

// selectedSetups are the setups E2E_SETUPS names (all when unset).
func selectedSetups() []setup {
	want := strings.TrimSpace(os.Getenv("E2E_SETUPS"))
	if want == "" {
		return allSetups
	}
	var out []setup
	for _, s := range allSetups {
		if slices.Contains(strings.Split(want, ","), s.id) {
			out = append(out, s)
		}
	}
	return out
}

// comparisonDeployment is the demo Deployment every setup runs: readiness probe every 1 s,
// liveness probe every 5 s that restarts after 6 failures (30 s), a 64 MiB memory limit, and
// a volume that outlives container restarts for the crash-loop state.
func comparisonDeployment(ns string, annotations map[string]string, extraArgs []string, preStop bool) *appsv1.Deployment {
	args := append([]string{"--crash-state-file=" + crashVolume + "/crashes", "--oom-after-requests=50"}, extraArgs...)
	d := demoDeployment(ns, "demo", annotations, args)
	spec := &d.Spec.Template.Spec
	spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	c := &spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: crashVolume}}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(demoPort)}},
		PeriodSeconds: 5, TimeoutSeconds: 1, FailureThreshold: 6,
	}
	if preStop {
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: drainSeconds}}}
	}
	return d
}

// instance is one setup running in one scenario.
type instance struct {
	setup
	ns             string
	d              *appsv1.Deployment
	targets        *targetSet
	seen           *presence
	plain, retry   *load
	stopLoads      func()
	victims        []victim
	faultAt        time.Time
	recoveredAt    time.Time // when the fault was lifted (node restored); zero: by itself
	victimRestarts string
}

type victim struct {
	pod, addr, containerID string
}

var (
	resultsMu sync.Mutex
	results   = benchfmt.E2ERun{Cores: runtime.NumCPU()}
)

var _ = Describe("Comparison under load", Ordered, ContinueOnFailure, func() {
	BeforeAll(func() {
		results.Started = time.Now().UTC()
		results.Seed = GinkgoRandomSeed()
		results.LoadBefore = loadAverage()
	})

	It("graceful rolling update", func(ctx SpecContext) {
		insts := startInstances(ctx, "rollout")
		for _, in := range insts {
			in.faultAt = time.Now()
			restartRollout(ctx, in.d)
		}
		for _, in := range insts {
			waitRolledOut(ctx, in.d)
		}
		time.Sleep(10 * time.Second) // keep measuring while old endpoints age out of the callers' views
		for _, in := range insts {
			in.stopLoads()
		}
		for _, in := range insts {
			record(in.result("rollout"))
			fmt.Fprintf(GinkgoWriter, "rollout %s: %s\n", in.id, in.plain)
		}
		for _, in := range insts {
			if in.id == "registrar" {
				Expect(in.plain.failed.Load()).To(BeZero(), "registrar rollout: %s", in.plain)
				Expect(in.plain.afterSigterm.Load()).To(BeZero(), "registrar rollout: %s", in.plain)
			}
		}
	}, SpecTimeout(8*time.Minute))

	It("SIGKILL of a container (the kubelet restarts it)", func(ctx SpecContext) {
		insts := startInstances(ctx, "sigkill")
		pickVictims(ctx, insts, 1)
		for _, in := range insts {
			in.fault()
			for _, v := range in.victims {
				out, err := exec.Command("ctr", "--address", containerdSock, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", v.containerID).CombinedOutput()
				Expect(err).NotTo(HaveOccurred(), "ctr tasks kill: %s", out)
			}
		}
		finish(ctx, insts, "sigkill", 3*time.Minute, func(in *instance, r benchfmt.E2EScenario) {
			// The caller must stop meeting the dead container within 15 s (a generous bound; the
			// figures belong to docs/e2e.md): registrar excludes its address, or the kubelet has
			// restarted it and it answers again before registrar has seen it fail.
			if in.id == "registrar" {
				if r.ExclusionMS != nil {
					Expect(time.Duration(*r.ExclusionMS)*time.Millisecond).To(BeNumerically("<", 15*time.Second),
						"registrar took too long to stop listing a killed container: %+v", r)
				}
				Expect(r.LastFailMS).NotTo(BeNil(), "no request met the killed container: the fault did not happen? %+v", r)
				Expect(time.Duration(*r.LastFailMS)*time.Millisecond).To(BeNumerically("<", 15*time.Second),
					"the caller still met the killed container's address 15 s after the kill: %+v", r)
			}
		})
	}, SpecTimeout(8*time.Minute))

	It("a hung process (stops answering, still alive)", func(ctx SpecContext) {
		insts := startInstances(ctx, "hang")
		pickVictims(ctx, insts, 1)
		faultVictims(insts, fmt.Sprintf("/fault/hang?for=%ds", hangFor))
		finish(ctx, insts, "hang", 3*time.Minute, nil)
	}, SpecTimeout(8*time.Minute))

	It("a lost node (kubelet stopped, the pods' processes frozen with SIGSTOP)", func(ctx SpecContext) {
		insts := startInstances(ctx, "node-lost")
		pickVictims(ctx, insts, replicas) // every replica runs on the one node
		pid, err := os.ReadFile(kubeletPIDFile)
		Expect(err).NotTo(HaveOccurred())
		kubelet := strings.TrimSpace(string(pid))
		var frozen []string
		restored := false
		restore := func() {
			if restored {
				return
			}
			restored = true
			for _, id := range frozen {
				if out, err := exec.Command("ctr", "--address", containerdSock, "-n", "k8s.io", "tasks", "kill", "--all", "--signal", "SIGCONT", id).CombinedOutput(); err != nil {
					fmt.Fprintf(GinkgoWriter, "ctr tasks kill -s SIGCONT %s: %v %s\n", id, err, out)
				}
			}
			if err := exec.Command("kill", "-CONT", kubelet).Run(); err != nil {
				fmt.Fprintf(GinkgoWriter, "kill -CONT kubelet: %v\n", err)
			}
		}
		DeferCleanup(restore)
		Expect(exec.Command("kill", "-STOP", kubelet).Run()).To(Succeed())
		stoppedAt := time.Now()
		for _, in := range insts {
			in.faultAt = stoppedAt
			in.plain.markFault()
			in.retry.markFault()
			for _, v := range in.victims {
				// SIGSTOP to every process of the container (the cgroup freezer of `ctr tasks
				// pause` timed out on this loaded machine once).
				frozen = append(frozen, v.containerID)
				out, err := exec.Command("ctr", "--address", containerdSock, "-n", "k8s.io", "tasks", "kill", "--all", "--signal", "SIGSTOP", v.containerID).CombinedOutput()
				Expect(err).NotTo(HaveOccurred(), "ctr tasks kill -s SIGSTOP: %s", out)
			}
		}
		// The node stays lost until every setup's caller has dropped every address, or 150 s
		// (under the 300 s after which the node controller would evict the pods).
		for lost := time.Now().Add(150 * time.Second); time.Now().Before(lost) && anyListed(insts); {
			time.Sleep(500 * time.Millisecond) // polling the callers' views
		}
		restore()
		for _, in := range insts {
			in.recoveredAt = time.Now()
		}
		finish(ctx, insts, "node-lost", 4*time.Minute, nil)
	}, SpecTimeout(12*time.Minute))

	It("an OOM-style crash loop", func(ctx SpecContext) {
		insts := startInstances(ctx, "crashloop")
		pickVictims(ctx, insts, 1)
		faultVictims(insts, fmt.Sprintf("/fault/oom?restarts=%d", crashRepeats))
		// The loop is over once each victim has crashed 1+crashRepeats times.
		finishWhen(ctx, insts, "crashloop", 5*time.Minute, func(ctx context.Context, in *instance) bool {
			for _, v := range in.victims {
				p := &corev1.Pod{}
				if k8s.Get(ctx, client.ObjectKey{Namespace: in.ns, Name: v.pod}, p) != nil || len(p.Status.ContainerStatuses) == 0 ||
					p.Status.ContainerStatuses[0].RestartCount < 1+crashRepeats {
					return false
				}
			}
			return true
		}, nil)
	}, SpecTimeout(10*time.Minute))

	It("prints the comparison table", func() {
		resultsMu.Lock()
		defer resultsMu.Unlock()
		results.Finished = time.Now().UTC()
		results.LoadAfter = loadAverage()
		results.WallSeconds = results.Finished.Sub(results.Started).Seconds()
		table := renderTable(results.Results)
		AddReportEntry("comparison table", table)
		fmt.Fprintf(GinkgoWriter, "wall time of the comparison: %s; load average before %v, after %v\n",
			time.Duration(results.WallSeconds*float64(time.Second)).Round(time.Second), results.LoadBefore, results.LoadAfter)
		if path := os.Getenv("E2E_RESULTS"); path != "" {
			Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
			b, err := json.MarshalIndent(results, "", "  ")
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(path, b, 0o644)).To(Succeed())
		}
	})
})

// pickVictims picks n victims in each setup.
func pickVictims(ctx context.Context, insts []*instance, n int) {
	for _, in := range insts {
		in.pickVictims(ctx, n)
	}
}

// faultVictims marks the fault on each setup and asks each victim's demo app for it: a POST
// of path (its /fault/... endpoint) that must answer 200.
func faultVictims(insts []*instance, path string) {
	httpc := &http.Client{Timeout: 5 * time.Second}
	for _, in := range insts {
		in.fault()
		for _, v := range in.victims {
			resp, err := httpc.Post("http://"+v.addr+path, "", nil)
			Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
		}
	}
}

// startInstances deploys every selected setup in a namespace of its own, waits until each
// caller lists every replica, and starts both callers on each; 3 s of steady load follow.
func startInstances(ctx context.Context, scenario string) []*instance {
	GinkgoHelper()
	var insts []*instance
	for _, s := range selectedSetups() {
		in := &instance{setup: s, ns: newNamespace(ctx)}
		in.d = s.deploy(in.ns)
		in.targets = s.targets(ctx, in.ns)
		Expect(k8s.Create(ctx, in.d)).To(Succeed())
		insts = append(insts, in)
	}
	for _, in := range insts {
		waitRolledOut(ctx, in.d)
		Eventually(in.targets.list).WithTimeout(3*time.Minute).Should(HaveLen(replicas), "%s: the caller never saw every replica", in.id)
	}
	for _, in := range insts {
		lctx, cancel := context.WithCancel(ctx)
		in.seen = in.targets.seen
		var stopPlain, stopRetry func()
		in.plain, stopPlain = startLoadWith(lctx, in.targets, loadRPS, false)
		in.retry, stopRetry = startLoadWith(lctx, in.targets, loadRPS, true)
		in.stopLoads = func() { stopPlain(); stopRetry(); cancel() }
		DeferCleanup(in.stopLoads)
	}
	fmt.Fprintf(GinkgoWriter, "%s: %d setups deployed, loads running\n", scenario, len(insts))
	time.Sleep(3 * time.Second) // steady load before the fault: measurement, not synchronisation
	return insts
}

// pickVictims chooses the first n pods (by name) the caller lists.
func (in *instance) pickVictims(ctx context.Context, n int) {
	GinkgoHelper()
	pods := podsOf(ctx, in.d)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	listed := in.targets.list()
	for _, p := range pods {
		addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(demoPort))
		if !slices.Contains(listed, addr) || len(p.Status.ContainerStatuses) == 0 || len(in.victims) == n {
			continue
		}
		in.victims = append(in.victims, victim{pod: p.Name, addr: addr,
			containerID: strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")})
	}
	Expect(in.victims).To(HaveLen(n), "%s: not enough listed pods to fault", in.id)
}

func anyListed(insts []*instance) bool {
	for _, in := range insts {
		for _, v := range in.victims {
			if in.seen.isPresent(v.addr) {
				return true
			}
		}
	}
	return false
}

func (in *instance) fault() {
	in.faultAt = time.Now()
	in.plain.markFault()
	in.retry.markFault()
}

// back says whether every victim is listed again and answered the plain caller after the
// fault was over: after its last failure, its exclusion and the recovery, whichever is last.
func (in *instance) back() bool {
	for _, v := range in.victims {
		if !in.seen.isPresent(v.addr) {
			return false
		}
		r := in.plain.results(v.addr)
		since := latest(in.faultAt, r.lastFail, in.seen.leftAfter(v.addr, in.faultAt), in.recoveredAt)
		if !r.lastOK.After(since) {
			return false
		}
	}
	return true
}

// finish waits (at most bound) until every setup's victims are back, keeps the load on for
// 5 s more, stops it, and records the results; check runs on each result.
func finish(ctx context.Context, insts []*instance, scenario string, bound time.Duration, check func(*instance, benchfmt.E2EScenario)) {
	finishWhen(ctx, insts, scenario, bound, nil, check)
}

// finishWhen is finish where a victim counts as back only once over(instance) holds too.
func finishWhen(ctx context.Context, insts []*instance, scenario string, bound time.Duration, over func(context.Context, *instance) bool, check func(*instance, benchfmt.E2EScenario)) {
	GinkgoHelper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		all := true
		for _, in := range insts {
			all = all && (over == nil || over(ctx, in)) && in.back()
		}
		if all {
			break
		}
		time.Sleep(500 * time.Millisecond) // polling the callers' views
	}
	time.Sleep(5 * time.Second) // late failures after recovery count too
	for _, in := range insts {
		in.stopLoads()
		in.victimRestarts = victimState(ctx, in)
	}
	rs := make([]benchfmt.E2EScenario, len(insts))
	for i, in := range insts {
		rs[i] = in.result(scenario)
		record(rs[i])
	}
	for i, in := range insts {
		r := rs[i]
		if in.id == "registrar" {
			Expect(r.CameBack).To(BeTrue(), "%s: registrar's victim did not come back: %+v", scenario, r)
		}
		if check != nil {
			check(in, r)
		}
	}
}

func (in *instance) result(scenario string) benchfmt.E2EScenario {
	r := benchfmt.E2EScenario{
		Scenario: scenario, Setup: in.id, SetupName: in.name,
		Requests: in.plain.requests(), Failed: in.plain.failed.Load(), NoTarget: in.plain.noTarget.Load(),
		AfterSigterm:  in.plain.afterSigterm.Load(),
		RetryRequests: in.retry.requests(), RetryFailed: in.retry.failed.Load(), RetryNoTarget: in.retry.noTarget.Load(),
		VictimRestarts: in.victimRestarts, FirstErrors: strings.Join(in.plain.firstErrs, "; "),
	}
	if len(in.victims) == 0 {
		return r
	}
	// Exclusion: the last victim to leave the list (a lost node takes all of them).
	var excl, back time.Duration
	excluded, cameBack := true, in.back()
	for _, v := range in.victims {
		left := in.seen.leftAfter(v.addr, in.faultAt)
		if left.IsZero() {
			excluded = false
		} else {
			excl = max(excl, left.Sub(in.faultAt))
		}
		// Back for good: last listed again after leaving (a crash loop leaves several times);
		// if it never left, answering again after its last failure.
		at := in.plain.results(v.addr).okAfterLastFail
		if !left.IsZero() {
			at = in.seen.lastRejoined(v.addr, in.faultAt)
		}
		back = max(back, at.Sub(in.faultAt))
		if lf := in.plain.results(v.addr).lastFail; !lf.IsZero() {
			ms := lf.Sub(in.faultAt).Milliseconds()
			if r.LastFailMS == nil || ms > *r.LastFailMS {
				r.LastFailMS = &ms
			}
		}
	}
	if excluded {
		ms := excl.Milliseconds()
		r.ExclusionMS = &ms
	}
	r.CameBack = cameBack
	if cameBack {
		ms := back.Milliseconds()
		r.BackMS = &ms
	}
	return r
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

func victimState(ctx context.Context, in *instance) string {
	var parts []string
	for _, v := range in.victims {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: in.ns, Name: v.pod}, p); err != nil || len(p.Status.ContainerStatuses) == 0 {
			parts = append(parts, v.pod+": unknown")
			continue
		}
		cs := p.Status.ContainerStatuses[0]
		reason := ""
		if t := cs.LastTerminationState.Terminated; t != nil {
			reason = fmt.Sprintf(", last exit %d %s", t.ExitCode, t.Reason)
		}
		parts = append(parts, fmt.Sprintf("%s: %d restarts%s", v.pod, cs.RestartCount, reason))
	}
	return strings.Join(parts, "; ")
}

func record(r benchfmt.E2EScenario) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results.Results = append(results.Results, r)
	b, _ := json.Marshal(r)
	fmt.Fprintf(GinkgoWriter, "%s\n", b)
}

// renderTable is the one table `make test-e2e` prints.
func renderTable(rs []benchfmt.E2EScenario) string {
	var b strings.Builder
	b.WriteString("| scenario | setup | requests | failed | failed, retry once | fault → not picked | fault → last failed request | back after recovery |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		excl, back := "never left the list", "no"
		if r.Scenario == "rollout" {
			excl = "—"
		} else if r.ExclusionMS != nil {
			excl = fmtMS(*r.ExclusionMS)
		}
		if r.Scenario == "rollout" {
			back = "—"
		} else if r.CameBack && r.BackMS != nil {
			back = "yes, " + fmtMS(*r.BackMS) + " after the fault"
		}
		lastFail := "—"
		if r.LastFailMS != nil {
			lastFail = fmtMS(*r.LastFailMS)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s | %s | %s |\n", r.Scenario, r.Setup, r.Requests, r.Failed, r.RetryFailed, excl, lastFail, back)
	}
	return b.String()
}

func fmtMS(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
}

func loadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var out []float64
	for _, f := range strings.Fields(string(b))[:3] {
		v, _ := strconv.ParseFloat(f, 64)
		out = append(out, v)
	}
	return out
}
