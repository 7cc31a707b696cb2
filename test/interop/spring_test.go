//go:build interop

package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
	"github.com/registrar-dev/registrar/test/support/metrics"
)

// TestSpringCallers: the Spring Boot application, once with the Eureka client on
// cmd/eureka-api and once with Spring Cloud Zookeeper on the ZooKeeper store, both reading the
// pods one operator publishes. Each step asserts what both callers' DiscoveryClient and
// LoadBalancer return and how soon:
//
//   - ready: the pods appear, with their address, port and metadata;
//   - unready (INTEROP_ROUNDS times): the Eureka caller stops listing the pod within its fetch
//     interval + 1 s of the pod's status write, the ZooKeeper caller (which reads ZooKeeper on
//     every call) within 1 s of the store change, each load balancer within its cache TTL + 1 s
//     of its getInstances(); the pod comes back when ready again;
//   - deleted, and node lost (the node's Lease stops being renewed): the pod leaves;
//   - INTEROP_CHANGES (1,000) readiness flips: each is in /eureka/apps/delta within 100 ms
//     (p99) of the etcd change (reported, not asserted, when eureka-api or this process waited
//     for a CPU most of the time: see overloaded); the Eureka client applies the deltas
//     without one hash code mismatch and without one full fetch (counted from its own log
//     lines and its Spectator counter, and from the server's fetch counters); both callers end
//     on the store's pods.
func TestSpringCallers(t *testing.T) {
	fetch := time.Duration(envInt(t, "INTEROP_FETCH_SECONDS", 2)) * time.Second
	rounds := envInt(t, "INTEROP_ROUNDS", 5)
	changes := envInt(t, "INTEROP_CHANGES", 1000)
	w := newWorld(t)
	res := &results{FetchIntervalSeconds: int(fetch.Seconds()), LBCacheTTLSeconds: lbCacheTTL.Seconds(), NodeLeaseTimeoutSeconds: nodeLeaseTimeout.Seconds()}

	w.addPod(anchor, "")
	var pods []string
	for _, node := range w.nodes.names {
		pods = append(pods, w.addPod(web, node))
	}
	if _, ok := eventually(time.Minute, func() bool { return sameSet(w.storePods(web), pods) }); !ok {
		t.Fatalf("the store holds %v, want %v", w.storePods(web), pods)
	}

	started := time.Now()
	eu := startEurekaCaller(t, w, fetch)
	zk := startZooKeeperCaller(t, w)
	eu.waitServing(started)
	zk.waitServing(started)
	callers := []*caller{eu, zk}

	t.Run("ready", func(t *testing.T) {
		want := w.addrs(pods...)
		for _, c := range callers {
			c.mustSee(t, web, want, fetch+30*time.Second)
		}
		w.checkFields(t, eu, zk, pods)
	})

	// leave makes a pod ineligible through act and measures when each caller stops listing
	// and picking it.
	leave := func(t *testing.T, what, pod string, act func() time.Time) {
		t.Helper()
		addr := w.addr(pod)
		mark := w.rec.mark()
		t0 := act()
		m := measureLeave(t, callers, web, addr, t0, 2*time.Minute)
		storeAt, ok := w.rec.await(mark, w.key(web, pod), true, time.Minute)
		if !ok {
			t.Fatalf("%s: the store never deleted %s", what, pod)
		}
		m.Store = storeAt.Sub(t0).Seconds()
		m.What, m.Pod = what, pod
		res.Leaves = append(res.Leaves, m)
		t.Logf("%s %s: store %.3fs, eureka list %.3fs pick %.3fs, zookeeper list %.3fs pick %.3fs",
			what, pod, m.Store, m.EurekaList, m.EurekaPick, m.ZooKeeperList, m.ZooKeeperPick)
	}

	t.Run("unready", func(t *testing.T) {
		for i := range rounds {
			pod := pods[i%len(pods)]
			leave(t, "unready", pod, func() time.Time { t0 := time.Now(); w.setReady(pod, false); return t0 })
			m := res.Leaves[len(res.Leaves)-1]
			checkUnready(t, i, pod, m, fetch)
			w.setReady(pod, true)
			for _, c := range callers {
				c.mustSee(t, web, w.addrs(pods...), fetch+lbCacheTTL+30*time.Second)
			}
		}
	})

	t.Run("deleted", func(t *testing.T) {
		gone := pods[0]
		leave(t, "deleted", gone, func() time.Time { t0 := time.Now(); w.deletePod(gone); return t0 })
		m := res.Leaves[len(res.Leaves)-1]
		if limit := (fetch + time.Second).Seconds(); m.EurekaList > limit {
			t.Errorf("the Eureka client listed deleted %s for %.3fs, over its fetch interval + 1 s", gone, m.EurekaList)
		}
		pods[0] = w.addPod(web, w.nodes.names[0])
		for _, c := range callers {
			c.mustSee(t, web, w.addrs(pods...), fetch+lbCacheTTL+30*time.Second)
		}
	})

	t.Run("node lost", func(t *testing.T) {
		lost := pods[2]
		leave(t, "node lost", lost, func() time.Time { return w.nodes.lose(w.ctx, w.nodes.names[2]) })
		m := res.Leaves[len(res.Leaves)-1]
		// From the node's last renewal: the operator's --node-lease-timeout, then the caller.
		if limit := (nodeLeaseTimeout + fetch + 3*time.Second).Seconds(); m.EurekaList > limit {
			t.Errorf("the Eureka client listed %s for %.3fs after its node's last renewal, over node-lease-timeout + fetch interval + 3 s (%.0fs)", lost, m.EurekaList, limit)
		}
		pods = pods[:2]
		for _, c := range callers {
			c.mustSee(t, web, w.addrs(pods...), fetch+lbCacheTTL+30*time.Second)
		}
	})

	t.Run("changes", func(t *testing.T) {
		for len(pods) < 10 {
			pods = append(pods, w.addPod(web, w.nodes.names[len(pods)%2]))
		}
		eu.mustSee(t, web, w.addrs(pods...), fetch+lbCacheTTL+30*time.Second)
		before := w.fetchCounts(t, eu)
		ready := map[string]bool{}
		for _, p := range pods {
			ready[p] = true
		}
		// First every pod leaves and the client drops the application; then the pod whose
		// instance ID sorts last comes back while the others' deletions are still in the
		// delta window (the Java client then adds the delta's application whole:
		// internal/eureka's TestDeltaKeepsTheJavaClientInStep).
		for _, p := range pods {
			w.setReady(p, false)
			ready[p] = false
		}
		eu.mustSee(t, web, nil, fetch+lbCacheTTL+30*time.Second)
		last := slices.MaxFunc(pods, func(a, b string) int { return strings.Compare(w.eurekaID(a), w.eurekaID(b)) })
		w.setReady(last, true)
		ready[last] = true
		eu.mustSee(t, web, w.addrs(last), fetch+lbCacheTTL+30*time.Second)
		rng := rand.New(rand.NewPCG(uint64(envInt(t, "INTEROP_SEED", 1)), 36))
		var lat []float64
		cpu0, err := readCPUTime(w.eurekaAPI.Pid())
		if err != nil {
			t.Fatal(err)
		}
		self0, err := readCPUTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for i := range changes {
			pod := pods[rng.IntN(len(pods))]
			ready[pod] = !ready[pod]
			mark := w.rec.mark()
			w.setReady(pod, ready[pod])
			storeAt, ok := w.rec.await(mark, w.key(web, pod), !ready[pod], time.Minute)
			if !ok {
				t.Fatalf("change %d: the store never wrote %s ready=%v", i, pod, ready[pod])
			}
			want := "ADDED"
			if !ready[pod] {
				want = "DELETED"
			}
			seenAt, err := w.awaitDelta(w.eurekaID(pod), want, 30*time.Second)
			if err != nil {
				t.Fatalf("change %d: %v", i, err)
			}
			lat = append(lat, seenAt.Sub(storeAt).Seconds())
		}
		var want []string
		for _, p := range pods {
			if ready[p] {
				want = append(want, w.addr(p))
			}
		}
		for _, c := range callers {
			c.mustSee(t, web, want, fetch+lbCacheTTL+30*time.Second)
		}
		after := w.fetchCounts(t, eu)
		run := changeRun{Changes: changes, DeltaLatency: summarize(lat), Before: before, After: after}
		if cpu1, err := readCPUTime(w.eurekaAPI.Pid()); err == nil {
			run.ServerCPUWait = waitShare(cpu0, cpu1)
		}
		if self1, err := readCPUTime(os.Getpid()); err == nil {
			run.TestCPUWait = waitShare(self0, self1)
		}
		res.Changes = &run
		t.Logf("%d changes: in the delta %.1f ms p50, %.1f ms p99, %.1f ms max after the etcd change; client: %d deltas, %d full fetches, %d hash code mismatches (log), mismatch counter %v; server: %v full, %v delta fetches",
			changes, 1000*run.DeltaLatency.P50, 1000*run.DeltaLatency.P99, 1000*run.DeltaLatency.Max,
			after.ClientDeltas-before.ClientDeltas, after.ClientFull-before.ClientFull, after.ClientMismatches-before.ClientMismatches,
			after.ClientMismatchCounter-before.ClientMismatchCounter, after.ServerFull-before.ServerFull, after.ServerDelta-before.ServerDelta)
		t.Logf("share of the time spent waiting for a CPU during the changes: eureka-api %.0f %%, the test %.0f %%; load average %v",
			100*run.ServerCPUWait, 100*run.TestCPUWait, benchfmt.LoadAvg())
		checkChanges(t, &run, before, after)
	})

	if out := os.Getenv("INTEROP_OUT"); out != "" && !t.Failed() {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			t.Errorf("write %s: %v", out, err)
		}
	}
}

// checkUnready asserts the limits of one unready round (m, seconds from the pod's status
// write) of TestSpringCallers.
func checkUnready(t *testing.T, i int, pod string, m leaveTimes, fetch time.Duration) {
	t.Helper()
	if limit := (fetch + time.Second).Seconds(); m.EurekaList > limit {
		t.Errorf("round %d: the Eureka client listed unready %s for %.3fs, over its fetch interval + 1 s (%.0fs)", i, pod, m.EurekaList, limit)
	}
	// The load balancers cache the discovery client's list for lbCacheTTL (expiry
	// checked on read): they drop the pod within that of getInstances().
	if limit := (lbCacheTTL + time.Second).Seconds(); m.EurekaPick-m.EurekaList > limit {
		t.Errorf("round %d: the Eureka caller's load balancer picked unready %s %.3fs after getInstances() dropped it, over its cache TTL + 1 s (%.0fs)", i, pod, m.EurekaPick-m.EurekaList, limit)
	}
	// Spring Cloud Zookeeper reads ZooKeeper on every getInstances(); the operator writes
	// ZooKeeper beside etcd.
	if m.ZooKeeperList-m.Store > 1 {
		t.Errorf("round %d: the ZooKeeper client listed unready %s %.3fs after the store change, over 1 s", i, pod, m.ZooKeeperList-m.Store)
	}
	if limit := (lbCacheTTL + time.Second).Seconds(); m.ZooKeeperPick-m.ZooKeeperList > limit {
		t.Errorf("round %d: the ZooKeeper caller's load balancer picked unready %s %.3fs after getInstances() dropped it, over its cache TTL + 1 s (%.0fs)", i, pod, m.ZooKeeperPick-m.ZooKeeperList, limit)
	}
}

// checkChanges asserts what TestSpringCallers' readiness flips must show: the delta latency
// (unless the machine was overloaded, which marks run), no full fetch and no hash code
// mismatch on either side, and a client that polled.
func checkChanges(t *testing.T, run *changeRun, before, after fetchCounts) {
	t.Helper()
	switch {
	case run.DeltaLatency.P99 <= deltaP99Limit.Seconds():
	case max(run.ServerCPUWait, run.TestCPUWait) > overloaded:
		// When the server or the process measuring it spends more of its time waiting
		// for a CPU than running, a 100 ms tail is the machine's run queue, not the
		// server: reported, not asserted. The result file says so and bench/interop
		// refuses to publish it. On a quiet machine (CI) the share is a few per cent.
		run.Overloaded = true
		t.Logf("NOT ASSERTED (machine overloaded): p99 from the etcd change to /eureka/apps/delta is %.1f ms, over %s, while eureka-api waited for a CPU %.0f %% and the test %.0f %% of the time they wanted one (over %.0f %%)",
			1000*run.DeltaLatency.P99, deltaP99Limit, 100*run.ServerCPUWait, 100*run.TestCPUWait, 100*overloaded)
	default:
		t.Errorf("p99 from the etcd change to /eureka/apps/delta is %.1f ms, over %s (CPU wait: eureka-api %.0f %%, the test %.0f %%)",
			1000*run.DeltaLatency.P99, deltaP99Limit, 100*run.ServerCPUWait, 100*run.TestCPUWait)
	}
	if n := after.ClientFull - before.ClientFull; n != 0 {
		t.Errorf("the Eureka client fetched the full registry %d times during %d changes, want 0", n, run.Changes)
	}
	if n := after.ClientMismatches - before.ClientMismatches; n != 0 {
		t.Errorf("the Eureka client logged %d hash code mismatches, want 0", n)
	}
	if n := after.ClientMismatchCounter - before.ClientMismatchCounter; n != 0 {
		t.Errorf("DiscoveryClient_ReconcileHashCodeMismatch rose by %v, want 0", n)
	}
	if n := after.ServerFull - before.ServerFull; n != 0 {
		t.Errorf("the server answered %v full fetches during the run, want 0", n)
	}
	if after.ClientDeltas-before.ClientDeltas < 2 {
		t.Errorf("the Eureka client applied %d deltas during the run: it did not poll", after.ClientDeltas-before.ClientDeltas)
	}
}

// results is what one run measured (INTEROP_OUT).
type results struct {
	FetchIntervalSeconds    int          `json:"fetchIntervalSeconds"`
	LBCacheTTLSeconds       float64      `json:"loadBalancerCacheTTLSeconds"`
	NodeLeaseTimeoutSeconds float64      `json:"nodeLeaseTimeoutSeconds"`
	Leaves                  []leaveTimes `json:"leaves"`
	Changes                 *changeRun   `json:"changes,omitempty"`
}

// leaveTimes: seconds from the fault (the pod's status write or deletion, the node's last
// Lease renewal) to the store's delete and to each caller no longer listing / picking the pod.
type leaveTimes struct {
	What          string  `json:"what"`
	Pod           string  `json:"pod"`
	Store         float64 `json:"store"`
	EurekaList    float64 `json:"eurekaGetInstances"`
	EurekaPick    float64 `json:"eurekaLoadBalancer"`
	ZooKeeperList float64 `json:"zookeeperGetInstances"`
	ZooKeeperPick float64 `json:"zookeeperLoadBalancer"`
}

type changeRun struct {
	Changes      int     `json:"changes"`
	DeltaLatency latency `json:"deltaLatencySeconds"`
	// ServerCPUWait, TestCPUWait: the share of the time eureka-api and the test process
	// wanted a CPU during the changes that they spent waiting for one (schedstat).
	ServerCPUWait float64 `json:"serverCPUWaitShare"`
	TestCPUWait   float64 `json:"testCPUWaitShare"`
	// Overloaded: the delta latency was over its limit while a CPU wait share was over
	// overloaded, so the limit was reported, not asserted.
	Overloaded bool        `json:"overloaded,omitempty"`
	Before     fetchCounts `json:"before"`
	After      fetchCounts `json:"after"`
}

type latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func summarize(v []float64) latency {
	if len(v) == 0 {
		return latency{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	at := func(q float64) float64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return latency{N: len(s), P50: at(0.5), P99: at(0.99), Max: s[len(s)-1]}
}

const (
	// deltaP99Limit: a change is in /eureka/apps/delta within this of the etcd change (p99).
	deltaP99Limit = 100 * time.Millisecond
	// overloaded: when eureka-api or the test process spent more than this share of the time
	// it wanted a CPU waiting for one, the latency measured is the machine's run queue. Seen:
	// 66 % / 72 % on the quiet machine (load 1), 78-81 % at load 25-35 (p99 11-17 ms), 87 % /
	// 91 % at load 78 (p99 111 ms).
	overloaded = 0.85
)

// cpuTime is the time a process's threads ran and waited on a run queue, from
// /proc/PID/task/*/schedstat (nanoseconds).
type cpuTime struct{ run, wait float64 }

func readCPUTime(pid int) (cpuTime, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return cpuTime{}, fmt.Errorf("schedstat of process %d: %v", pid, err)
	}
	var c cpuTime
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		var run, wait float64
		if _, err := fmt.Sscan(string(b), &run, &wait); err == nil {
			c.run, c.wait = c.run+run, c.wait+wait
		}
	}
	return c, nil
}

// waitShare is the share of the time the process wanted a CPU between two readings that it
// spent waiting for one.
func waitShare(from, to cpuTime) float64 {
	run, wait := to.run-from.run, to.wait-from.wait
	if run+wait <= 0 {
		return 0
	}
	return wait / (run + wait)
}

// fetchCounts are the Eureka client's fetches as its own log and counter tell them, and the
// server's (registrar_eureka_fetches_total).
type fetchCounts struct {
	ClientFull            int     `json:"clientFullFetches"`
	ClientDeltas          int     `json:"clientDeltas"`
	ClientMismatches      int     `json:"clientHashCodeMismatches"`
	ClientMismatchCounter float64 `json:"clientMismatchCounter"`
	ServerFull            float64 `json:"serverFullFetches"`
	ServerDelta           float64 `json:"serverDeltaFetches"`
}

func (w *world) fetchCounts(t *testing.T, eu *caller) fetchCounts {
	t.Helper()
	st, err := eu.stats()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	ss, err := metrics.Scrape(ctx, w.eurekaMetrics)
	if err != nil {
		t.Fatalf("scrape eureka-api: %v", err)
	}
	var full, delta float64
	for series, v := range ss.BySeries() {
		switch {
		case strings.HasPrefix(series, "registrar_eureka_fetches_total") && strings.Contains(series, `kind="full"`):
			full += v
		case strings.HasPrefix(series, "registrar_eureka_fetches_total") && strings.Contains(series, `kind="delta"`):
			delta += v
		}
	}
	return fetchCounts{
		ClientFull: eu.logCount(logFullFetch), ClientDeltas: eu.logCount(logDelta), ClientMismatches: eu.logCount(logMismatch),
		ClientMismatchCounter: st.meter("DiscoveryClient_ReconcileHashCodeMismatch"),
		ServerFull:            full, ServerDelta: delta,
	}
}

// awaitDelta polls /eureka/apps/delta (JSON, as Spring's client asks) until instance id is
// in it with that actionType, and returns when it first was.
func (w *world) awaitDelta(id, action string, d time.Duration) (time.Time, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(w.ctx, http.MethodGet, w.eurekaURL+"/apps/delta", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := cl.Do(req)
		if err == nil {
			var doc deltaDoc
			err = json.NewDecoder(resp.Body).Decode(&doc)
			_ = resp.Body.Close()
			if err == nil {
				at := time.Now()
				last = doc.action(id)
				if last == action {
					return at, nil
				}
			}
		}
		time.Sleep(2 * time.Millisecond) // a tight delta poll: the latency measured is the server's
	}
	return time.Time{}, fmt.Errorf("/eureka/apps/delta never showed %s %s within %s (last: %q)", id, action, d, last)
}

type deltaDoc struct {
	Applications struct {
		Application []struct {
			Instance []struct {
				InstanceID string `json:"instanceId"`
				ActionType string `json:"actionType"`
			} `json:"instance"`
		} `json:"application"`
	} `json:"applications"`
}

func (d deltaDoc) action(id string) string {
	for _, app := range d.Applications.Application {
		for _, in := range app.Instance {
			if in.InstanceID == id {
				return in.ActionType
			}
		}
	}
	return ""
}

// addrs are the "host:port" of pods.
func (w *world) addrs(pods ...string) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, w.addr(p))
	}
	return out
}

// mustSee waits until the caller's getInstances and load balancer show exactly want.
func (c *caller) mustSee(t *testing.T, service string, want []string, d time.Duration) {
	t.Helper()
	var why string
	if _, ok := eventually(d, func() bool { var ok bool; ok, why = c.sees(service, want); return ok }); !ok {
		t.Fatalf("%s after %s: %s", c.name, d, why)
	}
}

// checkFields: each caller's ServiceInstance of each pod carries the pod's address, port,
// instance ID and metadata.
func (w *world) checkFields(t *testing.T, eu, zk *caller, pods []string) {
	t.Helper()
	eInst, err := eu.instances(web)
	if err != nil {
		t.Fatal(err)
	}
	zInst, err := zk.instances(web)
	if err != nil {
		t.Fatal(err)
	}
	for i, pod := range pods {
		addr, node := w.addr(pod), w.nodes.names[i]
		e, z := eInst[addr], zInst[addr]
		if e.InstanceID != w.eurekaID(pod) || e.Port != 8080 || e.Secure || e.URI != "http://"+addr ||
			e.Metadata["namespace"] != w.ns || e.Metadata["pod"] != pod || e.Metadata["node"] != node || e.Metadata["port.http"] != "8080" {
			t.Errorf("Eureka caller's instance of %s: %+v", pod, e)
		}
		if z.InstanceID != w.zkID(pod) || z.Port != 8080 || z.URI != "http://"+addr ||
			z.Metadata["registrar.dev/pod"] != pod || z.Metadata["registrar.dev/node"] != node {
			t.Errorf("ZooKeeper caller's instance of %s: %+v", pod, z)
		}
		if strings.ToLower(e.ServiceID) != web || strings.ToLower(z.ServiceID) != web {
			t.Errorf("service IDs %q (Eureka), %q (ZooKeeper), want %s", e.ServiceID, z.ServiceID, web)
		}
	}
}

// measureLeave polls every caller (getInstances and 12 load-balancer picks every 25 ms) until
// none lists or picks addr, and returns the seconds from t0 to each caller's last sight of it.
func measureLeave(t *testing.T, callers []*caller, service, addr string, t0 time.Time, d time.Duration) leaveTimes {
	t.Helper()
	var m leaveTimes
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for _, c := range callers {
		wg.Go(func() {
			var listGone, pickGone time.Time
			deadline := time.Now().Add(d)
			for (listGone.IsZero() || pickGone.IsZero()) && time.Now().Before(deadline) {
				inList, picked, err := c.listed(service, addr, 12)
				at := time.Now()
				if err == nil {
					if inList {
						listGone = time.Time{}
					} else if listGone.IsZero() {
						listGone = at
					}
					if picked {
						pickGone = time.Time{}
					} else if pickGone.IsZero() {
						pickGone = at
					}
				}
				time.Sleep(25 * time.Millisecond) // polling the caller
			}
			mu.Lock()
			defer mu.Unlock()
			if listGone.IsZero() || pickGone.IsZero() {
				failures = append(failures, fmt.Sprintf("%s still lists or picks %s after %s", c.name, addr, d))
				return
			}
			l, p := listGone.Sub(t0).Seconds(), pickGone.Sub(t0).Seconds()
			if strings.HasPrefix(c.name, "eureka") {
				m.EurekaList, m.EurekaPick = l, p
			} else {
				m.ZooKeeperList, m.ZooKeeperPick = l, p
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatal(strings.Join(failures, "; "))
	}
	return m
}
