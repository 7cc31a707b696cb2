//go:build interop

package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/test/support/proc"
)

// caller is one run of the Spring Boot application (test/interop/app) with one discovery
// client enabled.
type caller struct {
	t    *testing.T
	name string
	url  string
	p    *proc.Process
	http *http.Client
}

// Log lines of com.netflix.discovery.DiscoveryClient (eureka-client 2.0.6) the test counts.
const (
	logFullFetch = "Getting all instance registry info from the eureka server"
	logDelta     = "Got delta update with apps hashcode"
	logMismatch  = "The Reconcile hashcodes do not match"
)

// startEurekaCaller runs the application with the Eureka client reading eurekaURL every
// fetchEvery, the ZooKeeper client off.
func startEurekaCaller(t *testing.T, w *world, fetchEvery time.Duration) *caller {
	return startCaller(t, "eureka-caller",
		"--spring.cloud.zookeeper.enabled=false", "--spring.cloud.zookeeper.discovery.enabled=false",
		"--eureka.client.enabled=true",
		"--eureka.client.service-url.defaultZone="+w.eurekaURL+"/",
		fmt.Sprintf("--eureka.client.registry-fetch-interval-seconds=%d", int(fetchEvery.Seconds())),
	)
}

// startZooKeeperCaller runs the application with Spring Cloud Zookeeper's discovery client
// on the ZooKeeper store, the Eureka client off.
func startZooKeeperCaller(t *testing.T, w *world) *caller {
	return startCaller(t, "zookeeper-caller",
		"--eureka.client.enabled=false",
		"--spring.cloud.zookeeper.enabled=true", "--spring.cloud.zookeeper.connect-string="+w.zk.Addr,
	)
}

// startCaller launches the application; waitServing waits until it answers. The two are
// apart so that both callers can start at once.
func startCaller(t *testing.T, name string, args ...string) *caller {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	all := append([]string{
		// A small heap and C1 only: the application starts faster on a shared 2-core machine.
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-jar", appJar,
		"--server.port=" + port,
		"--spring.cloud.loadbalancer.cache.ttl=" + lbCacheTTL.String(),
	}, args...)
	logPath := filepath.Join(logDir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".log")
	p, err := proc.Start(proc.Config{Name: name, Bin: javaBin, Args: all, LogPath: logPath, Env: os.Environ()})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	c := &caller{t: t, name: name, url: "http://" + addr, p: p, http: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- %s log tail ---\n%s", name, p.LogTail(40))
		}
	})
	return c
}

func (c *caller) waitServing(started time.Time) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := c.p.WaitHTTP(ctx, c.url+"/stats"); err != nil {
		c.t.Fatalf("%s did not start: %v\n%s", c.name, err, c.p.LogTail(40))
	}
	c.t.Logf("%s serving %s after it was started", c.name, time.Since(started).Round(10*time.Millisecond))
}

// instance is what the application's DiscoveryClient returned for one instance.
type instance struct {
	InstanceID string            `json:"instanceId"`
	ServiceID  string            `json:"serviceId"`
	Host       string            `json:"host"`
	Port       int               `json:"port"`
	Secure     bool              `json:"secure"`
	URI        string            `json:"uri"`
	Metadata   map[string]string `json:"metadata"`
}

func (c *caller) get(path string, into any) error {
	resp, err := c.http.Get(c.url + path)
	if err != nil {
		return fmt.Errorf("%s GET %s: %w", c.name, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s GET %s: %w", c.name, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s GET %s: %s: %s", c.name, path, resp.Status, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%s GET %s: %w: %s", c.name, path, err, body)
	}
	return nil
}

// instances is DiscoveryClient.getInstances(service), by "host:port".
func (c *caller) instances(service string) (map[string]instance, error) {
	var list []instance
	if err := c.get("/instances/"+service, &list); err != nil {
		return nil, err
	}
	out := map[string]instance{}
	for _, in := range list {
		out[fmt.Sprintf("%s:%d", in.Host, in.Port)] = in
	}
	return out, nil
}

// picks are the distinct "host:port" LoadBalancerClient.choose(service) returned in n calls
// ("" for a call that found no instance).
func (c *caller) picks(service string, n int) (map[string]int, error) {
	var list []string
	if err := c.get(fmt.Sprintf("/picks/%s?n=%d", service, n), &list); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, a := range list {
		out[a]++
	}
	return out, nil
}

// stats is the application's /stats: its discovery client, HeartbeatEvents, and the Eureka
// client's Spectator meters.
type stats struct {
	Discovery  string             `json:"discovery"`
	Heartbeats int64              `json:"heartbeats"`
	Meters     map[string]float64 `json:"meters"`
}

func (c *caller) stats() (stats, error) {
	var s stats
	err := c.get("/stats", &s)
	return s, err
}

// meter sums the Spectator measurements whose ID starts with name.
func (s stats) meter(name string) float64 {
	var sum float64
	for id, v := range s.Meters {
		if strings.HasPrefix(id, name) {
			sum += v
		}
	}
	return sum
}

// logCount counts the lines of the application's log that contain s.
func (c *caller) logCount(s string) int {
	b, err := os.ReadFile(c.p.LogPath())
	if err != nil {
		c.t.Fatalf("read %s's log: %v", c.name, err)
	}
	return strings.Count(string(b), s)
}

// sees reports whether the caller's view of service is exactly want ("host:port"), through
// getInstances and through the load balancer (every wanted address picked in 4·len(want)
// round-robin calls, no other and no empty pick).
func (c *caller) sees(service string, want []string) (ok bool, why string) {
	got, err := c.instances(service)
	if err != nil {
		return false, err.Error()
	}
	if !sameSet(keys(got), want) {
		return false, fmt.Sprintf("getInstances(%q) = %v, want %v", service, sorted(keys(got)), sorted(want))
	}
	n := max(4*len(want), 4)
	picks, err := c.picks(service, n)
	if err != nil {
		return false, err.Error()
	}
	if len(want) == 0 {
		if len(picks) != 1 || picks[""] != n {
			return false, fmt.Sprintf("choose(%q) picked %v, want no instance", service, picks)
		}
		return true, ""
	}
	if !sameSet(keys(picks), want) {
		return false, fmt.Sprintf("choose(%q) picked %v, want each of %v", service, picks, sorted(want))
	}
	return true, ""
}

// listed reports whether getInstances(service) lists addr, and whether the load balancer
// picks it (in n calls).
func (c *caller) listed(service, addr string, n int) (inList, picked bool, err error) {
	got, err := c.instances(service)
	if err != nil {
		return false, false, err
	}
	_, inList = got[addr]
	p, err := c.picks(service, n)
	if err != nil {
		return false, false, err
	}
	return inList, p[addr] > 0, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		if !m[s] {
			return false
		}
	}
	return true
}
