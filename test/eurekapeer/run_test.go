//go:build eurekapeer

package eurekapeer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/registrar-dev/registrar/bench/benchfmt"
	"github.com/registrar-dev/registrar/test/support/proc"
)

// caller is one caller process and the requests of its log read so far.
type caller struct {
	setup string
	fetch int
	log   string
	proc  *proc.Process

	mu   sync.Mutex
	reqs []Request
}

// tail reads the caller's log as it grows.
func (c *caller) tail(ctx context.Context) {
	var off int64
	var rest []byte
	for ctx.Err() == nil {
		if f, err := os.Open(c.log); err == nil {
			if _, err := f.Seek(off, io.SeekStart); err == nil {
				data, _ := io.ReadAll(f)
				off += int64(len(data))
				data = append(rest, data...)
				cut := bytes.LastIndexByte(data, '\n') + 1
				rest = append([]byte(nil), data[cut:]...)
				if reqs, err := ParseLog(bytes.NewReader(data[:cut])); err == nil {
					c.mu.Lock()
					c.reqs = append(c.reqs, reqs...)
					c.mu.Unlock()
				}
			}
			_ = f.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond): // the caller flushes every 200 ms
		}
	}
}

// recent returns the requests of service sent in [from, to) among the last ones read.
func (c *caller) recent(service string, from, to time.Time) []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Request
	lo, hi := from.UnixMilli(), to.UnixMilli()
	for i := len(c.reqs) - 1; i >= 0; i-- {
		r := c.reqs[i]
		if r.Sent < lo-5000 { // completions are logged out of order, by at most the 2 s timeout
			break
		}
		if r.Service == service && r.Sent >= lo && r.Sent < hi {
			out = append(out, r)
		}
	}
	return out
}

func (c *caller) snapshot() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.reqs...)
}

type key struct{ setup, scenario string }

type victim struct {
	name, ip string
	p        *proc.Process
}

func (h *harness) startVictim(r int, setup, sc string) *victim {
	ip := victimIP(r, setup, sc)
	v := &victim{name: fmt.Sprintf("victim-r%d-%s", r, sc), ip: ip}
	args := []string{"--peer.mode=instance", "--server.address=" + ip, fmt.Sprintf("--server.port=%d", appPort),
		"--spring.application.name=" + sc, fmt.Sprintf("--peer.drain-seconds=%d", drainSeconds)}
	if setup == setupRegistrar {
		args = append(args, "--eureka.client.enabled=false")
	} else {
		args = append(args, "--eureka.client.service-url.defaultZone="+h.eureka[setup].base, "--eureka.client.fetch-registry=false",
			"--eureka.instance.ip-address="+ip, "--eureka.instance.instance-id="+v.name)
		if setup == setupTuned {
			args = append(args, "--eureka.instance.lease-renewal-interval-in-seconds=5", "--eureka.instance.lease-expiration-duration-in-seconds=15")
		}
	}
	v.p = h.start(proc.Config{Name: setup + "-" + v.name, Bin: "java", LogPath: filepath.Join(h.s.dir, setup+"-"+v.name+".log"),
		Args: jvm("128m", h.s.appJar, args...)})
	if setup == setupRegistrar {
		h.kube.addPod(v.name, sc, fmt.Sprintf("ep-r%d-%s", r, sc), ip)
	}
	return v
}

// answers polls the instance until it answers or d passes.
func answers(ip string, d time.Duration) (time.Time, bool) {
	c := &http.Client{Timeout: time.Second}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) { // polling a starting process
		if resp, err := c.Get("http://" + addr(ip) + "/hello"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now(), true
			}
		}
	}
	return time.Time{}, false
}

// settled reports whether every caller, for every service, picked exactly the survivor and
// the run's victim in the last seconds, all successfully.
func (h *harness) settled(r int) (bool, string) {
	now := time.Now()
	for _, c := range h.calls {
		for _, sc := range benchfmt.EurekaPeerScenarios {
			want := map[string]bool{addr(survivorIP(c.setup, sc)): false, addr(victimIP(r, c.setup, sc)): false}
			for _, q := range c.recent(sc, now.Add(-5*time.Second), now.Add(-2*time.Second)) {
				if _, ok := want[q.Addr]; !ok || !q.OK {
					return false, fmt.Sprintf("caller %s/%d %s: %s ok=%v", c.setup, c.fetch, sc, q.Addr, q.OK)
				}
				want[q.Addr] = true
			}
			for a, seen := range want {
				if !seen {
					return false, fmt.Sprintf("caller %s/%d %s: not picking %s", c.setup, c.fetch, sc, a)
				}
			}
		}
	}
	return true, ""
}

// dropped reports whether every caller has not picked its setup's lost instance for 5 s.
func (h *harness) dropped(r int) bool {
	now := time.Now()
	for _, c := range h.calls {
		v := addr(victimIP(r, c.setup, "lost"))
		for _, q := range c.recent("lost", now.Add(-5*time.Second), now) {
			if q.Addr == v {
				return false
			}
		}
	}
	return true
}

// selfPreservation counts the Eureka servers' eviction ticks skipped so far because
// self-preservation was on (their DEBUG line "lease expiration is currently disabled").
func (h *harness) selfPreservation() map[string]int {
	out := map[string]int{}
	for setup := range h.eureka {
		data, err := os.ReadFile(filepath.Join(h.s.dir, "eureka-server-"+setup+".log"))
		if err == nil {
			out[setup] = bytes.Count(data, []byte("lease expiration is currently disabled"))
		}
	}
	return out
}

// startVictims starts the run's instances a few at a time (a dozen JVMs starting at once
// starve the callers of this small machine) and waits until they answer.
func (h *harness) startVictims(r int) map[key]*victim {
	victims := map[key]*victim{}
	for _, sc := range benchfmt.EurekaPeerScenarios {
		batch := map[key]*victim{}
		for _, setup := range benchfmt.EurekaPeerSetups {
			batch[key{setup, sc}] = h.startVictim(r, setup, sc)
		}
		for k, v := range batch {
			if _, ok := answers(v.ip, 4*time.Minute); !ok {
				h.t.Fatalf("run %d: %s/%s did not start (log %s)", r, k.setup, k.scenario, v.p.LogPath())
			}
			victims[k] = v
		}
	}
	return victims
}

// waitSettled waits until every caller picks exactly the survivors and the run's instances.
func (h *harness) waitSettled(r int, began time.Time) {
	deadline := time.Now().Add(6 * time.Minute)
	for {
		ok, why := h.settled(r)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %d: callers did not settle: %s", r, why)
		}
		time.Sleep(time.Second) // polling the callers' logs
	}
	h.log("run %d: settled after %s; faults now", r, time.Since(began).Round(time.Second))
}

// faults hits every run instance at once; the scenarios that end on their own record when
// in faultEnd (under mu); wg waits for their goroutines.
func (h *harness) faults(r int, victims map[key]*victim, mu *sync.Mutex, faultEnd map[key]time.Time, wg *sync.WaitGroup) {
	t := h.t
	for k, v := range victims {
		switch k.scenario {
		case "graceful":
			if k.setup == setupRegistrar {
				h.kube.deletePod(v.name, drainSeconds+20)
			}
			_ = v.p.Signal(syscall.SIGTERM)
			wg.Go(func() {
				v.p.WaitExit(3 * drainSeconds * time.Second)
				if k.setup == setupRegistrar {
					h.kube.forget(v.name)
				}
			})
		case "sigkill":
			_ = v.p.Signal(syscall.SIGKILL)
			wg.Go(func() {
				v.p.WaitExit(30 * time.Second)
				if err := v.p.Restart(); err != nil { // systemd's Restart=always, the kubelet's restart
					t.Errorf("restart %s: %v", v.name, err)
					return
				}
				if at, ok := answers(v.ip, 4*time.Minute); ok {
					mu.Lock()
					faultEnd[k] = at
					mu.Unlock()
				}
			})
		case "hang":
			_ = v.p.Signal(syscall.SIGSTOP)
			wg.Go(func() {
				time.Sleep(15 * time.Second) // the fault's length
				_ = v.p.Signal(syscall.SIGCONT)
				mu.Lock()
				faultEnd[k] = time.Now()
				mu.Unlock()
			})
		case "lost":
			_ = v.p.Signal(syscall.SIGSTOP)
			if k.setup == setupRegistrar {
				h.kube.lose(fmt.Sprintf("ep-r%d-lost", r), true)
			}
		}
	}
}

// analyze reads every caller's log over the run's window.
func (h *harness) analyze(r int, t0, end time.Time, faultEnd map[key]time.Time) []benchfmt.EurekaPeerCell {
	var cells []benchfmt.EurekaPeerCell
	for _, c := range h.calls {
		reqs := c.snapshot()
		for _, sc := range benchfmt.EurekaPeerScenarios {
			over, ok := faultEnd[key{c.setup, sc}]
			if !ok {
				over = end
			}
			cell := Analyze(reqs, sc, addr(victimIP(r, c.setup, sc)), t0, over, end, Gap)
			cell.Scenario, cell.Setup, cell.Fetch = sc, c.setup, c.fetch
			cells = append(cells, cell)
			stop := "never"
			if cell.StopSeconds != nil {
				stop = fmt.Sprintf("%.1f s", *cell.StopSeconds)
			}
			h.log("run %d: %-8s %-11s fetch %2d s: %5d requests, %4d failed, %d overload, stops picking %s",
				r, sc, c.setup, c.fetch, cell.Requests, cell.Failed, cell.Overload, stop)
		}
	}
	return cells
}

func (h *harness) run(r int) benchfmt.EurekaPeerRun {
	out := benchfmt.EurekaPeerRun{Started: time.Now().UTC().Format(time.RFC3339), LoadBefore: benchfmt.LoadAvg()}
	began := time.Now()
	victims := h.startVictims(r)
	h.log("run %d: %d instances answer; waiting for every caller to pick them", r, len(victims))
	h.waitSettled(r, began)
	spBefore := h.selfPreservation()
	t0 := time.Now()
	var mu sync.Mutex
	faultEnd := map[key]time.Time{}
	var wg sync.WaitGroup
	h.faults(r, victims, &mu, faultEnd, &wg)
	// The lost instances come back once every caller stopped picking them, or at the cap.
	for time.Since(t0) < h.s.lostCap && (time.Since(t0) <= 10*time.Second || !h.dropped(r)) {
		time.Sleep(time.Second) // polling the callers' logs
	}
	restored := time.Now()
	out.RestoredAfter = restored.Sub(t0).Seconds()
	for k, v := range victims {
		if k.scenario == "lost" {
			_ = v.p.Signal(syscall.SIGCONT)
			mu.Lock()
			faultEnd[k] = restored
			mu.Unlock()
			if k.setup == setupRegistrar {
				h.kube.lose(fmt.Sprintf("ep-r%d-lost", r), false)
			}
		}
	}
	h.log("run %d: lost instances restored after %s", r, restored.Sub(t0).Round(time.Second))
	end := restored.Add(30 * time.Second)
	if earliest := t0.Add(200 * time.Second); end.Before(earliest) {
		end = earliest // graceful: 70 s drain + the slowest caller's caches (30 s + 30 s + 35 s)
	}
	time.Sleep(time.Until(end) + 3*time.Second) // the run's length; then the last requests' outcomes are logged
	wg.Wait()
	mu.Lock()
	out.Cells = h.analyze(r, t0, end, faultEnd)
	mu.Unlock()
	out.SelfPreservation = map[string]int{}
	for setup, n := range h.selfPreservation() {
		out.SelfPreservation[setup] = n - spBefore[setup]
	}
	h.log("run %d: eviction ticks skipped by self-preservation during the run: %v", r, out.SelfPreservation)
	// The run's instances go: the Eureka ones deregister and drain in the background.
	for k, v := range victims {
		_ = v.p.Signal(syscall.SIGCONT)
		if k.setup == setupRegistrar {
			h.kube.forget(v.name)
			v.p.Kill()
		} else {
			_ = v.p.Signal(syscall.SIGTERM)
		}
	}
	out.WallSeconds = time.Since(began).Seconds()
	out.LoadAfter = benchfmt.LoadAvg()
	return out
}
