package faults

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// operator is one registrar process built from ./cmd.
type operator struct {
	t       *testing.T
	name    string
	args    []string
	logPath string
	metrics string
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr atomic.Value
}

// operatorConfig says how to start an operator process.
type operatorConfig struct {
	store, prefix string
	// leaderNamespace turns leader election on, with short lease settings, in that namespace.
	leaderNamespace string
	extra           []string
}

func (c operatorConfig) args(metricsAddr string) []string {
	args := []string{
		"--kubeconfig=" + kubeconf, "--store-endpoints=" + c.store, "--store-prefix=" + c.prefix,
		"--enable-webhook=false", "--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=0",
		"--store-timeout=2s", "--zap-log-level=info",
	}
	if c.leaderNamespace != "" {
		args = append(args, "--leader-elect=true", "--leader-election-namespace="+c.leaderNamespace,
			"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms")
	} else {
		args = append(args, "--leader-elect=false", "--store-fence-name=faults")
	}
	return append(args, c.extra...)
}

// startOperator starts a process; the test's cleanup kills it and, when the test failed,
// prints the end of its log.
func startOperator(t *testing.T, name string, cfg operatorConfig) *operator {
	t.Helper()
	o := &operator{t: t, name: name, logPath: filepath.Join(t.TempDir(), name+".log"), metrics: freeAddr(t, "127.0.0.1")}
	o.args = cfg.args(o.metrics)
	o.start()
	t.Cleanup(func() {
		o.kill()
		if t.Failed() || os.Getenv("FAULTS_LOGS") != "" {
			o.dumpLog(40)
		}
	})
	return o
}

func (o *operator) start() {
	o.t.Helper()
	logf, err := os.OpenFile(o.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		o.t.Fatal(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== start %s at %s\n", o.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(binary, o.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		o.t.Fatalf("start operator %s: %v", o.name, err)
	}
	o.cmd, o.exited = cmd, make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		if err := cmd.Wait(); err != nil {
			o.exitErr.Store(err.Error())
		}
		close(exited)
	}(cmd, o.exited)
}

// restart starts the process again after kill (same flags, same metrics port).
func (o *operator) restart() {
	o.t.Helper()
	o.kill()
	o.start()
}

func (o *operator) pid() int { return o.cmd.Process.Pid }

// kill sends SIGKILL (after SIGCONT, in case it is paused) and waits for the exit.
func (o *operator) kill() {
	if o.cmd == nil {
		return
	}
	_ = o.cmd.Process.Signal(syscall.SIGKILL)
	_ = o.cmd.Process.Signal(syscall.SIGCONT)
	<-o.exited
}

func (o *operator) signal(sig syscall.Signal) {
	o.t.Helper()
	if err := o.cmd.Process.Signal(sig); err != nil {
		o.t.Fatalf("signal %v to %s: %v", sig, o.name, err)
	}
}

// running reports whether the process has not exited.
func (o *operator) running() bool {
	select {
	case <-o.exited:
		return false
	default:
		return true
	}
}

// waitExit waits up to d for the process to exit on its own.
func (o *operator) waitExit(d time.Duration) bool {
	select {
	case <-o.exited:
		return true
	case <-time.After(d):
		return false
	}
}

func (o *operator) logContains(s string) bool {
	b, _ := os.ReadFile(o.logPath)
	return strings.Contains(string(b), s)
}

func (o *operator) dumpLog(lines int) {
	b, err := os.ReadFile(o.logPath)
	if err != nil {
		return
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	o.t.Logf("--- last %d log lines of operator %s ---\n%s", lines, o.name, strings.Join(all[max(0, len(all)-lines):], "\n"))
}

// metric sums the samples of a metric family (every label set) from /metrics; ok is false
// when the endpoint cannot be read.
func (o *operator) metric(name string) (float64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.metrics+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum, true
}

// freeAddr returns host:port with a port the kernel just handed out on host.
func freeAddr(t *testing.T, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("free port on %s: %v", host, err)
	}
	defer l.Close()
	return l.Addr().String()
}
