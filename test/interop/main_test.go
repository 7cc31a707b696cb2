//go:build interop

// Package interop runs existing Spring Cloud clients, unchanged, against what registrar
// publishes (issue 36 §2; `make test-interop`): one Spring Boot application
// (test/interop/app: Spring Boot 4.0.7, Spring Cloud 2025.1.4) started twice, once with the real
// Spring Cloud Netflix Eureka client pointed at cmd/eureka-api and once with the real Spring
// Cloud Zookeeper discovery client over the ZooKeeper store. Pods are made ready, unready,
// deleted and node-lost through a real API server (envtest's kube-apiserver) and the operator
// (built from ./cmd, its own process, writing a real etcd and a real ZooKeeper); the test reads
// what each application's DiscoveryClient.getInstances() and LoadBalancerClient.choose() return
// over the application's HTTP endpoint.
//
// The build tag keeps the suite out of `go test ./...`: it needs the Java application built by
// Maven (`make interop-app`), ZooKeeper (`make zookeeper-assets`) and a JDK.
package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/test/support/proc"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

var (
	env          *testenv.Env
	k8s          client.Client
	workDir      string
	kubeconf     string // an admin kubeconfig for the operator process
	registrarBin string // the operator, built from ./cmd
	eurekaAPIBin string // cmd/eureka-api
	appJar       string // test/interop/app's jar (make interop-app)
	javaBin      string
	logDir       string // the processes' logs: $INTEROP_LOG_DIR, else under workDir
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if workDir, err = os.MkdirTemp("", "registrar-interop-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "interop suite setup: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	return m.Run()
}

func setup() error {
	logf.SetLogger(logr.Discard())
	for _, v := range []string{"KUBEBUILDER_ASSETS", "ETCD_BIN", "INTEROP_APP_JAR"} {
		if os.Getenv(v) == "" {
			return fmt.Errorf("%s is not set (make test-interop sets KUBEBUILDER_ASSETS, ETCD_BIN and INTEROP_APP_JAR)", v)
		}
	}
	appJar = os.Getenv("INTEROP_APP_JAR")
	if _, err := os.Stat(appJar); err != nil {
		return fmt.Errorf("the caller application (make interop-app builds it): %w", err)
	}
	javaBin = "java"
	if j := os.Getenv("JAVA"); j != "" {
		javaBin = j
	}
	if _, err := exec.LookPath(javaBin); err != nil {
		return fmt.Errorf("no JDK: %w", err)
	}
	logDir = os.Getenv("INTEROP_LOG_DIR")
	if logDir == "" {
		logDir = filepath.Join(workDir, "logs")
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	var err error
	if registrarBin, err = proc.BuildRegistrar(workDir); err != nil {
		return err
	}
	if eurekaAPIBin, err = buildEurekaAPI(workDir); err != nil {
		return err
	}
	if env, err = testenv.Start(testenv.Options{}); err != nil {
		return err
	}
	k8s = env.Client
	kubeconf = filepath.Join(workDir, "kubeconfig")
	return env.WriteAdminKubeconfig("interop-admin", kubeconf)
}

// buildEurekaAPI builds cmd/eureka-api into dir, as the image build does (no cgo).
func buildEurekaAPI(dir string) (string, error) {
	root, err := proc.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "eureka-api")
	build := exec.Command("go", "build", "-o", bin, "./cmd/eureka-api")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build eureka-api: %w\n%s", err, out)
	}
	return bin, nil
}

// envInt is an integer setting from the environment, def when unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// eventually polls cond every 20 ms until it holds or d passed; it returns how long it took
// and whether it held.
func eventually(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > d {
			return time.Since(start), false
		}
		time.Sleep(20 * time.Millisecond) // polling an observable outcome
	}
}
