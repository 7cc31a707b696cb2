// Package faults holds registrar's fault suite: real processes on loopback (envtest's
// kube-apiserver and etcd, etcd processes as the store, the operator built from ./cmd and
// run as its own process) while the tests break them. Every test records each store event
// with a separate etcd watch and checks the invariants of invariants_test.go at the end.
//
// `go test ./test/faults/` runs the fast subset; FAULTS_FULL=1 (make test-faults) runs all
// and writes the summary table to $FAULTS_SUMMARY.
package faults

import (
	"context"

	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/test/support/proc"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

var (
	testEnv   *envtest.Environment
	restCfg   *rest.Config
	k8s       client.Client
	scheme    *runtime.Scheme
	kubeconf  string // kubeconfig file of an admin user, for the operator processes
	binary    string // the operator built from ./cmd
	setupErr  error
	workDir   string
	apiServer *restartedAPIServer // set once the API server was restarted by a test
)

// full reports whether the whole suite runs (make test-faults), not only the fast subset.
func full() bool { return os.Getenv("FAULTS_FULL") == "1" }

// slow skips a test outside the full suite.
func slow(t *testing.T) {
	t.Helper()
	if !full() {
		t.Skip("slow fault: runs in make test-faults (FAULTS_FULL=1)")
	}
}

func TestMain(m *testing.M) {
	code := run(m)
	os.Exit(code)
}

func run(m *testing.M) int {
	var err error
	if workDir, err = os.MkdirTemp("", "registrar-faults-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	defer teardown()
	code := m.Run()
	printSummary()
	return code
}

func setup() error {
	logf.SetLogger(logr.Discard())
	if os.Getenv("KUBEBUILDER_ASSETS") == "" || os.Getenv("ETCD_BIN") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS and ETCD_BIN must be set (make test does)")
	}
	var err error
	if binary, err = proc.BuildRegistrar(workDir); err != nil {
		return err
	}
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		return err
	}
	testEnv, restCfg, k8s, scheme = env.Environment, env.Config, env.Client, env.Scheme
	kubeconf = filepath.Join(workDir, "kubeconfig")
	return env.WriteAdminKubeconfig("faults-admin", kubeconf)
}

func teardown() {
	if testEnv != nil {
		_ = testEnv.Stop() // fails harmlessly on a kube-apiserver a test restarted
	}
	if apiServer != nil {
		apiServer.stop()
	}
}

// setupOnce starts the shared environment on the first test that needs it, so that the
// recorder's unit tests (recorder_test.go) run without it.
var setupOnce sync.Once

// requireSetup starts the shared environment once and fails (never skips) a test when it
// did not start.
func requireSetup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("fault suite setup: %v", setupErr)
	}
}

// result is one row of the summary table.
type result struct {
	fault       string
	events      int
	violations  int
	convergence time.Duration
	note        string
}

var (
	resultsMu sync.Mutex
	results   []result
)

func report(r result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, r)
}

func printSummary() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return
	}
	sort.SliceStable(results, func(i, j int) bool { return results[i].fault < results[j].fault })
	var b strings.Builder
	fmt.Fprintf(&b, "| Fault | Store events recorded | Invariant violations | Convergence | Notes |\n|---|---|---|---|---|\n")
	for _, r := range results {
		conv := "n/a"
		if r.convergence > 0 {
			conv = r.convergence.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s |\n", r.fault, r.events, r.violations, conv, r.note)
	}
	fmt.Print("\nFault suite summary\n\n" + b.String())
	if f := os.Getenv("FAULTS_SUMMARY"); f != "" {
		_ = os.WriteFile(f, []byte(b.String()), 0o644)
	}
}

// testCtx is a context bounded by the test's life.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
