//go:build eurekapeer

package eurekapeer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/bench/benchfmt"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/proc"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

// The driver's settings, from the environment (make bench-eureka-peer sets them).
type settings struct {
	serverJar, appJar string
	runs              int
	out, command, dir string
	lostCap           time.Duration
}

func settingsFromEnv(t *testing.T) settings {
	t.Helper()
	s := settings{serverJar: os.Getenv("EUREKA_PEER_SERVER_JAR"), appJar: os.Getenv("EUREKA_PEER_APP_JAR"),
		runs: 3, out: os.Getenv("EUREKA_PEER_OUT"), command: os.Getenv("EUREKA_PEER_COMMAND"),
		dir: os.Getenv("EUREKA_PEER_DIR"), lostCap: 330 * time.Second}
	if s.serverJar == "" || s.appJar == "" || os.Getenv("KUBEBUILDER_ASSETS") == "" || os.Getenv("ETCD_BIN") == "" {
		t.Fatal("EUREKA_PEER_SERVER_JAR, EUREKA_PEER_APP_JAR, KUBEBUILDER_ASSETS and ETCD_BIN must be set: run make bench-eureka-peer")
	}
	if v := os.Getenv("EUREKA_PEER_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("EUREKA_PEER_RUNS=%q", v)
		}
		s.runs = n
	}
	if v := os.Getenv("EUREKA_PEER_LOST_CAP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("EUREKA_PEER_LOST_CAP=%q", v)
		}
		s.lostCap = d
	}
	if s.dir == "" {
		s.dir = t.TempDir()
	}
	return s
}

// Setups (sides) and their index in the loopback addresses 127.x.<side>.<scenario>.
const (
	setupRegistrar = "registrar"
	setupEureka    = "eureka"
	setupTuned     = "eureka-5-15"
	appPort        = 8080
	drainSeconds   = 70
	fillers        = 30
)

func sideIndex(setup string) int {
	for i, s := range benchfmt.EurekaPeerSetups {
		if s == setup {
			return i + 1
		}
	}
	panic(setup)
}

func scenarioIndex(sc string) int {
	for i, s := range benchfmt.EurekaPeerScenarios {
		if s == sc {
			return i + 1
		}
	}
	panic(sc)
}

// survivorIP is the instance of a scenario's service that stays healthy; victimIP the one the
// fault hits in run r.
func survivorIP(setup, sc string) string {
	return fmt.Sprintf("127.10.%d.%d", sideIndex(setup), scenarioIndex(sc))
}

func victimIP(run int, setup, sc string) string {
	return fmt.Sprintf("127.%d.%d.%d", 20+run, sideIndex(setup), scenarioIndex(sc))
}

func addr(ip string) string { return ip + ":" + strconv.Itoa(appPort) }

// jvm is the JVM options of every Spring process: the machine is small and shared.
func jvm(heap string, jar string, args ...string) []string {
	return append([]string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k", "-Xmx" + heap, "-jar", jar}, args...)
}

type harness struct {
	t      *testing.T
	ctx    context.Context
	s      settings
	eureka map[string]*eurekaServer // setup → its server (not registrar)
	api    string                   // registrar's Eureka API base URL
	kube   *kubelet
	calls  []*caller
	mu     sync.Mutex
	procs  []*proc.Process // to kill at the end
}

func TestEurekaPeer(t *testing.T) {
	logf.SetLogger(logr.Discard())
	s := settingsFromEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, s: s, eureka: map[string]*eurekaServer{}}
	t.Cleanup(h.killAll)
	h.startRegistrar()
	h.startEurekaServers()
	h.startSurvivors()
	h.startCallers()
	var runs []benchfmt.EurekaPeerRun
	loadBefore := benchfmt.LoadAvg()
	for r := 1; r <= s.runs; r++ {
		run := h.run(r)
		runs = append(runs, run)
		if s.out != "" {
			if err := publish(s, runs, loadBefore); err != nil {
				t.Fatal(err)
			}
		}
	}
	tbl := benchfmt.EurekaPeerTable(runs)
	for _, row := range tbl.Rows {
		t.Log(strings.Join(row, " | "))
	}
}

func publish(s settings, runs []benchfmt.EurekaPeerRun, loadBefore [3]float64) error {
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	env := benchfmt.Envelope[benchfmt.EurekaPeerRun]{
		Kind: "bench-eureka-peer", Date: time.Now().UTC().Format(time.RFC3339), Commit: strings.TrimSpace(string(commit)),
		Command: s.command, Machine: benchfmt.MachineFacts(), Runs: runs,
		Tables: []benchfmt.Table{benchfmt.EurekaPeerTable(runs)},
	}
	env.Machine.LoadBefore, env.Machine.LoadAfter = loadBefore, benchfmt.LoadAvg()
	data, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.out, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", s.out, err)
	}
	return nil
}

func (h *harness) start(cfg proc.Config) *proc.Process {
	h.t.Helper()
	p, err := proc.Start(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p
}

func (h *harness) killAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.procs {
		_ = p.Signal(syscall.SIGCONT)
		p.Kill()
	}
}

func (h *harness) log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s eurekapeer: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// startRegistrar starts the real API server and etcd (envtest), a store etcd, the operator and
// cmd/eureka-api as processes, and the played kubelet.
func (h *harness) startRegistrar() {
	t := h.t
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconf := filepath.Join(h.s.dir, "kubeconfig")
	if err := env.WriteAdminKubeconfig("eurekapeer", kubeconf); err != nil {
		t.Fatal(err)
	}
	st, err := etcdtest.Start(filepath.Join(h.s.dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Stop)
	bin, err := proc.BuildRegistrar(h.s.dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := proc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	apiBin := filepath.Join(h.s.dir, "eureka-api")
	build := exec.Command("go", "build", "-o", apiBin, "./cmd/eureka-api")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build eureka-api: %v\n%s", err, out)
	}
	const prefix = "/registrar"
	metrics, err := ports.FreeLoopback()
	if err != nil {
		t.Fatal(err)
	}
	h.start(proc.Config{Name: "registrar", Bin: bin, LogPath: filepath.Join(h.s.dir, "registrar.log"), Args: []string{
		"--kubeconfig=" + kubeconf, "--store-endpoints=" + st.Endpoint(), "--store-prefix=" + prefix,
		"--enable-webhook=false", "--metrics-bind-address=" + metrics, "--health-probe-bind-address=0",
		"--leader-elect=false", "--store-fence-name=eurekapeer", "--zap-log-level=info"}})
	listen, err := ports.FreeLoopback()
	if err != nil {
		t.Fatal(err)
	}
	apiMetrics, err := ports.FreeLoopback()
	if err != nil {
		t.Fatal(err)
	}
	api := h.start(proc.Config{Name: "eureka-api", Bin: apiBin, LogPath: filepath.Join(h.s.dir, "eureka-api.log"), Args: []string{
		"--store-endpoints=" + st.Endpoint(), "--prefix=" + prefix, "--listen=" + listen, "--metrics-listen=" + apiMetrics}})
	ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
	defer cancel()
	if err := api.WaitHTTP(ctx, "http://"+apiMetrics+"/readyz"); err != nil {
		t.Fatal(err)
	}
	h.api = "http://" + listen + "/eureka/"
	h.kube = newKubelet(h.ctx, t, env)
	for _, sc := range benchfmt.EurekaPeerScenarios {
		h.kube.registry(sc)
	}
	h.log("registrar up: Eureka API %s", h.api)
}

// startEurekaServers starts the two Eureka servers and registers the fillers in each.
func (h *harness) startEurekaServers() {
	t := h.t
	var wg sync.WaitGroup
	for _, setup := range []string{setupEureka, setupTuned} {
		listen, err := ports.FreeLoopback()
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := strings.Cut(listen, ":")
		args := []string{"--server.port=" + port, "--eureka.server.wait-time-in-ms-when-sync-empty=0",
			// Logging only: the eviction ticks self-preservation skips are counted from it.
			"--logging.level.com.netflix.eureka.registry.AbstractInstanceRegistry=DEBUG"}
		es := &eurekaServer{base: "http://" + listen + "/eureka/", renew: 30, duration: 90, setup: setup}
		if setup == setupTuned {
			args = append(args, "--eureka.server.expected-client-renewal-interval-seconds=5")
			es.renew, es.duration = 5, 15
		}
		p := h.start(proc.Config{Name: "eureka-server-" + setup, Bin: "java", LogPath: filepath.Join(h.s.dir, "eureka-server-"+setup+".log"),
			Args: jvm("256m", h.s.serverJar, args...)})
		h.eureka[setup] = es
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(h.ctx, 3*time.Minute)
			defer cancel()
			if err := p.WaitHTTP(ctx, es.base+"apps"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, es := range h.eureka {
		for i := range fillers {
			es.add(instance{app: "filler", id: fmt.Sprintf("filler-%d", i), ip: fmt.Sprintf("127.99.%d.%d", sideIndex(es.setup), i+1)})
		}
		go es.renewLoop(h.ctx)
	}
	h.log("Eureka servers up with %d fillers each", fillers)
}

// startSurvivors serves the healthy instance of every scenario's service of every setup from
// this process, registered in the Eureka servers (renewed on time) and as ready pods.
func (h *harness) startSurvivors() {
	t := h.t
	for _, setup := range benchfmt.EurekaPeerSetups {
		for _, sc := range benchfmt.EurekaPeerScenarios {
			ip := survivorIP(setup, sc)
			srv := &http.Server{Addr: addr(ip), ReadHeaderTimeout: 5 * time.Second,
				Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
			go func() {
				if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
					t.Errorf("survivor %s: %v", ip, err)
				}
			}()
			t.Cleanup(func() { _ = srv.Close() })
			if setup == setupRegistrar {
				h.kube.addPod("survivor-"+sc, sc, "ep-survivors", ip)
			} else {
				h.eureka[setup].add(instance{app: sc, id: "survivor-" + sc, ip: ip})
			}
		}
	}
}

// startCallers starts one caller per setup and fetch interval, each calling every scenario's
// service.
func (h *harness) startCallers() {
	for _, setup := range benchfmt.EurekaPeerSetups {
		url := h.api
		if setup != setupRegistrar {
			url = h.eureka[setup].base
		}
		for _, fetch := range benchfmt.EurekaPeerFetches {
			name := fmt.Sprintf("caller-%s-%d", setup, fetch)
			c := &caller{setup: setup, fetch: fetch, log: filepath.Join(h.s.dir, name+".requests")}
			args := []string{"--peer.mode=caller", "--server.address=127.0.0.1", "--server.port=0",
				"--spring.application.name=" + name, "--eureka.client.register-with-eureka=false",
				"--eureka.client.service-url.defaultZone=" + url, "--peer.log=" + c.log,
				"--peer.services=" + strings.Join(benchfmt.EurekaPeerScenarios, ",")}
			if fetch != 30 {
				args = append(args, fmt.Sprintf("--eureka.client.registry-fetch-interval-seconds=%d", fetch),
					fmt.Sprintf("--spring.cloud.loadbalancer.cache.ttl=%ds", fetch))
			}
			c.proc = h.start(proc.Config{Name: name, Bin: "java", LogPath: filepath.Join(h.s.dir, name+".log"),
				Args: jvm("384m", h.s.appJar, args...)})
			go c.tail(h.ctx)
			h.calls = append(h.calls, c)
		}
	}
	h.log("%d callers started", len(h.calls))
}
