package faults

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/test/support/metrics"
	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/proc"
)

// operator is one registrar process built from ./cmd.
type operator struct {
	*proc.Process
	t       *testing.T
	name    string
	metrics string
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
	o := &operator{t: t, name: name, metrics: freeAddr(t, "127.0.0.1")}
	p, err := proc.Start(proc.Config{Name: name, Bin: binary, Args: cfg.args(o.metrics), LogPath: filepath.Join(t.TempDir(), name+".log")})
	if err != nil {
		t.Fatalf("start operator %s: %v", name, err)
	}
	o.Process = p
	t.Cleanup(func() {
		o.Kill()
		if t.Failed() || os.Getenv("FAULTS_LOGS") != "" {
			o.dumpLog(40)
		}
	})
	return o
}

// start starts the process again after kill (same flags, same metrics port).
func (o *operator) start() {
	o.t.Helper()
	if err := o.Resume(); err != nil {
		o.t.Fatal(err)
	}
}

func (o *operator) signal(sig syscall.Signal) {
	o.t.Helper()
	if err := o.Signal(sig); err != nil {
		o.t.Fatal(err)
	}
}

// running reports whether the process has not exited.
func (o *operator) running() bool { return o.Exited() == nil }

func (o *operator) dumpLog(lines int) {
	o.t.Logf("--- last %d log lines of operator %s ---\n%s", lines, o.name, o.LogTail(lines))
}

// metric sums the samples of a metric family (every label set) from /metrics; ok is false
// when the endpoint cannot be read.
func (o *operator) metric(name string) (float64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ss, err := metrics.Scrape(ctx, o.metrics)
	if err != nil {
		return 0, false
	}
	return ss.Sum(name), true
}

// freeAddr returns host:port with a port the kernel just handed out on host.
func freeAddr(t *testing.T, host string) string {
	t.Helper()
	addr, err := ports.FreeAddr(host)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
