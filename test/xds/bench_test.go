package xds_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/registrar-dev/registrar/bench/benchfmt"
	"github.com/registrar-dev/registrar/internal/xds"
	"github.com/registrar-dev/registrar/test/support/cpusplit"
)

// The xDS benchmark (`make bench-xds`): 100 ADS clients, each subscribed to the
// ClusterLoadAssignments of 100 registries (4 pods each), while the harness flips pods'
// readiness at up to 100 changes/s, each on a registry with no change in flight. Every change
// is followed through its stages, all timed from the API write (the status update sent):
//
//	floor        a plain watch of the same pods (its own connection) sees the write
//	operator_saw the operator's pod informer sees it
//	cache_set    the reconcile's ClusterLoadAssignment enters the xDS cache (OnPublished)
//	first_ack    the first client acknowledges a response holding it (OnAck)
//	all_acks     the last of the 100 clients does
//
// The clients run in their own process (this test binary re-executed), so that their CPU is
// told apart from the operator's; the operator runs in the test process, as the other specs
// run it (the command's defaults), with the load generator and the floor's watch.

const (
	benchClients    = 100
	benchRegistries = 100
	benchPods       = 4
	benchRate       = 100 // changes per second offered
	benchDuration   = 20 * time.Second
	benchTargetMs   = 100 // p99 all-ACK within this of the API watch floor's p99

	benchClientsEnv = "XDS_BENCH_CLIENTS" // set: this test binary is the client process
	benchAddrEnv    = "XDS_BENCH_ADDR"
	benchNamesEnv   = "XDS_BENCH_NAMES"
)

// change is one pod readiness flip followed to every client's ACK.
type change struct {
	name                                                     string // registry's resource name
	pod                                                      string
	healthy                                                  bool
	seq                                                      uint64 // the EDS cache version that first published it
	written, floor, operatorSaw, publish, firstAck, complete time.Time
	acked                                                    map[string]bool
}

// benchAcks correlates changes with the operator's informer, publishes and ACKs.
type benchAcks struct {
	mu      sync.Mutex
	pending map[string]*change // registry name → its change in flight
	byPod   map[string]*change // pod → its latest change
	done    []*change
}

var bench = &benchAcks{pending: map[string]*change{}, byPod: map[string]*change{}}

// seen records that a watcher saw pod with the given readiness (at most once per change).
func (b *benchAcks) seen(pod string, ready bool, at time.Time, stage func(*change) *time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.byPod[pod]
	if c == nil || c.written.IsZero() || c.healthy != ready {
		return
	}
	if t := stage(c); t.IsZero() {
		*t = at
	}
}

func (b *benchAcks) published(p xds.Published) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.pending[p.Name]
	if c == nil || c.seq != 0 {
		return
	}
	if _, present := p.Health[c.pod]; present == c.healthy {
		c.seq, c.publish = p.Seq, p.At
	}
}

func (b *benchAcks) ack(a xds.Ack) {
	if a.Nack != "" || a.TypeURL != resourcev3.EndpointType || !strings.HasPrefix(a.Node, "bench-") {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.pending[a.Name]
	if c == nil || c.seq == 0 || a.Seq < c.seq || c.acked[a.Node] {
		return
	}
	c.acked[a.Node] = true
	if len(c.acked) == 1 {
		c.firstAck = a.At
	}
	if len(c.acked) == benchClients {
		c.complete = a.At
		b.done = append(b.done, c)
		delete(b.pending, a.Name)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ownClientset is a clientset on its own connection (a Dial function makes client-go skip
// its shared transport cache) without client-side rate limit.
func ownClientset() *kubernetes.Clientset {
	GinkgoHelper()
	cfg := rest.CopyConfig(restCfg)
	cfg.QPS, cfg.Burst = 1000, 1000
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = d.DialContext
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return cs
}

// floorWatch is the API watch floor: a plain watch of the namespace's pods, as any
// controller has, recording when each change's readiness shows.
func floorWatch(ctx context.Context, cs *kubernetes.Clientset, ns string) {
	defer GinkgoRecover()
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			rv = list.ResourceVersion
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		w, err := cs.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			cancel()
			rv = ""
			continue
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if ev.Type == watch.Modified {
				bench.seen(p.Name, podReady(p), now, func(c *change) *time.Time { return &c.floor })
			}
		}
		w.Stop()
		cancel()
	}
}

// podWriter flips a pod's readiness with one status update (the latest object it wrote, read
// again on a conflict) and reports when the update that succeeded was sent.
type podWriter struct {
	cs   *kubernetes.Clientset
	mu   sync.Mutex
	last map[string]*corev1.Pod
}

func (w *podWriter) write(ctx context.Context, ns, name, ip string, ready bool) (time.Time, error) {
	w.mu.Lock()
	cur := w.last[name]
	w.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if cur == nil {
			var err error
			gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cur, err = w.cs.CoreV1().Pods(ns).Get(gctx, name, metav1.GetOptions{})
			cancel()
			if err != nil {
				return time.Time{}, fmt.Errorf("get pod %s: %w", name, err)
			}
		}
		p := cur.DeepCopy()
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: st, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: st, LastTransitionTime: now},
		}
		uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		sent := time.Now()
		out, err := w.cs.CoreV1().Pods(ns).UpdateStatus(uctx, p, metav1.UpdateOptions{})
		cancel()
		if err == nil {
			w.mu.Lock()
			w.last[name] = out
			w.mu.Unlock()
			return sent, nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return time.Time{}, fmt.Errorf("update status of pod %s: %w", name, err)
		}
		cur = nil
	}
}

// clientCounts is what the client process counted: EDS responses, the
// ClusterLoadAssignments in them, their bytes, and the redundant ones (content the client
// already had for that name).
type clientCounts struct {
	Ready     int `json:"ready"` // clients that received their first response
	Responses int `json:"responses"`
	CLAs      int `json:"cla_count"`
	Bytes     int `json:"bytes"`
	Redundant int `json:"redundant"`
}

// clientProcess is the client process, driven over its stdin and stdout.
type clientProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startClientProcess(names []string) *clientProcess {
	GinkgoHelper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestXDS$")
	cmd.Env = append(os.Environ(), benchClientsEnv+"=1", benchAddrEnv+"="+xdsAddr, benchNamesEnv+"="+strings.Join(names, ","))
	cmd.Stderr = GinkgoWriter
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	Expect(err).NotTo(HaveOccurred())
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	p := &clientProcess{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "COUNT ") {
				p.lines <- strings.TrimPrefix(sc.Text(), "COUNT ")
			}
		}
	}()
	return p
}

func (p *clientProcess) count() clientCounts {
	GinkgoHelper()
	_, err := io.WriteString(p.stdin, "COUNT\n")
	Expect(err).NotTo(HaveOccurred())
	var line string
	Eventually(p.lines).WithTimeout(30 * time.Second).Should(Receive(&line))
	var c clientCounts
	Expect(json.Unmarshal([]byte(line), &c)).To(Succeed())
	return c
}

func (p *clientProcess) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// runBenchClients is the client process: benchClients raw state-of-the-world ADS streams,
// each on its own connection, subscribed to every name and acknowledging each response at
// once. It answers "COUNT" on stdin with a COUNT line on stdout and ends when stdin closes.
func runBenchClients() error {
	addr, names := os.Getenv(benchAddrEnv), strings.Split(os.Getenv(benchNamesEnv), ",")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var total clientCounts
	errs := make(chan error, benchClients)
	for i := range benchClients {
		go func() { errs <- benchClient(ctx, fmt.Sprintf("bench-%03d", i), addr, names, &mu, &total) }()
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		select {
		case err := <-errs:
			return err
		default:
		}
		mu.Lock()
		b, _ := json.Marshal(total)
		mu.Unlock()
		fmt.Printf("COUNT %s\n", b)
	}
	return nil
}

func benchClient(ctx context.Context, node, addr string, names []string, mu *sync.Mutex, total *clientCounts) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer cc.Close()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return fmt.Errorf("open ADS stream: %w", err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: resourcev3.EndpointType, ResourceNames: names}); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	have := map[string][]byte{} // name → the content last received
	first := true
	for {
		resp, err := st.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		redundant := 0
		for _, r := range resp.GetResources() {
			var cla endpointv3.ClusterLoadAssignment
			if err := r.UnmarshalTo(&cla); err != nil {
				return fmt.Errorf("decode ClusterLoadAssignment: %w", err)
			}
			if prev, ok := have[cla.GetClusterName()]; ok && bytes.Equal(prev, r.GetValue()) {
				redundant++
			}
			have[cla.GetClusterName()] = r.GetValue()
		}
		mu.Lock()
		if first {
			total.Ready++ // the initial state is not counted as pushes
			first = false
		} else {
			total.Responses++
			total.CLAs += len(resp.GetResources())
			total.Bytes += proto.Size(resp)
			total.Redundant += redundant
		}
		mu.Unlock()
		if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: names,
			VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
			return fmt.Errorf("acknowledge: %w", err)
		}
	}
}

// lagOf are nearest-rank percentiles of lags.
func lagOf(d []time.Duration) benchfmt.XDSLag {
	if len(d) == 0 {
		return benchfmt.XDSLag{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := min(max(int(math.Ceil(p*float64(len(s))))-1, 0), len(s)-1)
		return math.Round(float64(s[i])/1e4) / 100
	}
	return benchfmt.XDSLag{N: len(s), P50: at(0.5), P99: at(0.99), Max: at(1)}
}

var _ = Describe("xDS benchmark", Label("bench"), func() {
	It("pushes pod churn to 100 ADS clients of 100 registries", func() {
		out := os.Getenv("XDS_BENCH_OUT")
		if out == "" {
			Skip("benchmark: run with `make bench-xds` (sets XDS_BENCH_OUT)")
		}
		loadBefore := benchfmt.LoadAvg()
		ns := newNamespace()
		names := make([]string, benchRegistries)
		pods := make([][]string, benchRegistries)
		healthy := make([][]bool, benchRegistries)
		ips := make([][]string, benchRegistries)
		for r := range benchRegistries {
			app := fmt.Sprintf("svc-%03d", r)
			newRegistry(ns, app, app, 9000)
			names[r] = app + "." + ns
			for p := range benchPods {
				pod := newPod(ns, fmt.Sprintf("%s-%d", app, p), app)
				ip := fmt.Sprintf("10.%d.%d.%d", r/250, r%250, p+1)
				setReady(pod, ip, true)
				ips[r] = append(ips[r], ip)
				pods[r] = append(pods[r], pod.Name)
				healthy[r] = append(healthy[r], true)
			}
		}
		Eventually(func() int {
			n := 0
			for _, name := range names {
				if len(published(name)) == benchPods {
					n++
				}
			}
			return n
		}).WithTimeout(5 * time.Minute).WithPolling(200 * time.Millisecond).Should(Equal(benchRegistries))

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		clients := startClientProcess(names)
		defer clients.stop()
		Eventually(func() int { return clients.count().Ready }).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).
			Should(Equal(benchClients))

		// The stages' watchers: the floor (its own connection) and the operator's informer.
		go floorWatch(ctx, ownClientset(), ns)
		inf, err := operator.cache.GetInformer(ctx, &corev1.Pod{})
		Expect(err).NotTo(HaveOccurred())
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Namespace == ns {
				bench.seen(p.Name, podReady(p), time.Now(), func(c *change) *time.Time { return &c.operatorSaw })
			}
		}})
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = inf.RemoveEventHandler(reg) }()

		writer := &podWriter{cs: ownClientset(), last: map[string]*corev1.Pod{}}
		counts0 := clients.count()
		self := os.Getpid()
		storeURL, err := url.Parse(storeServer.Endpoint())
		Expect(err).NotTo(HaveOccurred())
		group := func(p cpusplit.Proc) string {
			switch {
			case p.PID == self:
				return "operator"
			case p.PID == clients.cmd.Process.Pid:
				return "clients"
			case p.Comm == "etcd" && strings.Contains(p.Cmdline, ":"+storeURL.Port()):
				return "store"
			case p.Comm == "kube-apiserver" || p.Comm == "etcd":
				return "apiserver"
			}
			return ""
		}
		cpu0, err := cpusplit.Read(self)
		Expect(err).NotTo(HaveOccurred())

		rng := rand.New(rand.NewSource(1))
		tick := time.NewTicker(time.Second / benchRate)
		defer tick.Stop()
		started := time.Now()
		end := started.Add(benchDuration)
		writes, noIdle := 0, 0
		inflight := make(chan struct{}, 64) // API writes in flight at once
		var wg sync.WaitGroup
		idle := make([]int, 0, benchRegistries)
		for time.Now().Before(end) {
			<-tick.C
			// Pick among the registries with no change in flight, so that each push holds
			// one change per registry and "one ClusterLoadAssignment per changed registry"
			// is measured cleanly.
			idle = idle[:0]
			bench.mu.Lock()
			for r, name := range names {
				if _, busy := bench.pending[name]; !busy {
					idle = append(idle, r)
				}
			}
			if len(idle) == 0 {
				bench.mu.Unlock()
				noIdle++
				continue
			}
			r := idle[rng.Intn(len(idle))]
			p := rng.Intn(benchPods)
			healthy[r][p] = !healthy[r][p]
			c := &change{name: names[r], pod: pods[r][p], healthy: healthy[r][p], acked: map[string]bool{}}
			bench.pending[c.name] = c
			bench.byPod[c.pod] = c
			bench.mu.Unlock()
			inflight <- struct{}{}
			wg.Add(1)
			go func(ip string) {
				defer GinkgoRecover()
				defer wg.Done()
				defer func() { <-inflight }()
				// The change is stamped before the write: watchers ignore it until then.
				bench.mu.Lock()
				c.written = time.Now()
				bench.mu.Unlock()
				sent, err := writer.write(ctx, ns, c.pod, ip, c.healthy)
				Expect(err).NotTo(HaveOccurred())
				bench.mu.Lock()
				c.written = sent
				bench.mu.Unlock()
			}(ips[r][p])
			writes++
		}
		wg.Wait()
		Eventually(func() int { bench.mu.Lock(); defer bench.mu.Unlock(); return len(bench.pending) }).
			WithTimeout(2 * time.Minute).Should(BeZero())
		finished := time.Now()
		cpu1, err := cpusplit.Read(self)
		Expect(err).NotTo(HaveOccurred())
		// Every client counted its last push (it acknowledged it, so it received it).
		counts1 := clients.count()
		cancel()

		cores, other := cpusplit.Split(cpu0, cpu1, group)
		var floor, saw, set, first, all, over []time.Duration
		bench.mu.Lock()
		n := len(bench.done)
		for _, c := range bench.done {
			all = append(all, c.complete.Sub(c.written))
			set = append(set, c.publish.Sub(c.written))
			first = append(first, c.firstAck.Sub(c.written))
			if !c.floor.IsZero() {
				floor = append(floor, c.floor.Sub(c.written))
				over = append(over, c.complete.Sub(c.floor))
			}
			if !c.operatorSaw.IsZero() {
				saw = append(saw, c.operatorSaw.Sub(c.written))
			}
		}
		bench.mu.Unlock()
		resp, claCount := counts1.Responses-counts0.Responses, counts1.CLAs-counts0.CLAs
		byts := counts1.Bytes - counts0.Bytes
		perClientChange := float64(max(n*benchClients, 1))
		commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
		run := benchfmt.XDSRun{
			Started: started.UTC(), Finished: finished.UTC(), Commit: strings.TrimSpace(string(commit)),
			Cores: runtime.NumCPU(), LoadBefore: loadBefore, LoadAfter: benchfmt.LoadAvg(),
			WallSeconds: finished.Sub(started).Seconds(),
			Clients:     benchClients, ClientKind: "raw ADS state-of-the-world streams, one connection each, in their own process, each subscribed to every registry's ClusterLoadAssignment and acknowledging every response at once",
			Registries: benchRegistries, PodsPerRegistry: benchPods, TargetRate: benchRate,
			Writes: writes, Changes: n, NoIdleTicks: noIdle, AchievedRate: float64(writes) / benchDuration.Seconds(),
			Floor: lagOf(floor), OperatorSaw: lagOf(saw), CacheSet: lagOf(set), FirstAck: lagOf(first), AllAcks: lagOf(all),
			OverFloor: lagOf(over),
			Responses: resp, CLAs: claCount, Bytes: byts, RedundantCLAs: counts1.Redundant - counts0.Redundant,
			ResponsesPerChange: float64(resp) / perClientChange, CLAsPerChange: float64(claCount) / perClientChange,
			CLAsPerResponse: float64(claCount) / float64(max(resp, 1)), BytesPerResponse: float64(byts) / float64(max(resp, 1)),
			BytesPerCLA: float64(byts) / float64(max(claCount, 1)),
			CPUCores: benchfmt.XDSCPU{Operator: cores["operator"], APIServer: cores["apiserver"], Store: cores["store"],
				Clients: cores["clients"], Other: other},
			Busy: other >= benchfmt.BusyCores,
			Definitions: "all lags from the API write (the pod status update sent): floor = a plain API watch of the same pods sees it; " +
				"operator_saw = the operator's pod informer sees it; cache_set = the ClusterLoadAssignment enters the xDS cache; " +
				"first_ack / all_acks = the first / last of the clients acknowledged a response holding it; over_floor = all_acks minus the floor's event, per change",
		}
		run.P99OverFloor = math.Round((run.AllAcks.P99-run.Floor.P99)*100) / 100
		b, err := json.MarshalIndent(run, "", "  ")
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(out, b, 0o644)).To(Succeed())
		GinkgoWriter.Println(string(b))
		AddReportEntry("bench", string(b))
		Expect(n).To(Equal(writes), "every change reached every client")
	})
})
