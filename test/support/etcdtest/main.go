package etcdtest

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

// The server Main started for the test binary, or why there is none.
var (
	shared    *Server
	errShared = errors.New("etcdtest.Main did not run: call it from TestMain")
)

// Main runs a package's tests with one shared etcd server, started before m.Run and stopped
// after, and returns the exit code for os.Exit. setup, when set, runs once the server serves
// (to seed it, say); when the server or setup fails, the tests still run and every one that
// calls Shared fails with the reason.
func Main(m *testing.M, setup func(*Server) error) int {
	if os.Getenv("ETCD_BIN") == "" && os.Getenv("KUBEBUILDER_ASSETS") == "" {
		errShared = errors.New("neither ETCD_BIN nor KUBEBUILDER_ASSETS is set")
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "registrar-etcd-test-")
	if err != nil {
		errShared = fmt.Errorf("temp dir: %w", err)
		return m.Run()
	}
	defer os.RemoveAll(dir)
	srv, err := Start(dir)
	if err != nil {
		errShared = err
		fmt.Fprintf(os.Stderr, "etcd test server unavailable: %v\n", err)
		return m.Run()
	}
	defer srv.Stop()
	if setup != nil {
		if err := setup(srv); err != nil {
			errShared = fmt.Errorf("set up the etcd test server: %w", err)
			return m.Run()
		}
	}
	shared, errShared = srv, nil
	return m.Run()
}

// Shared is the server Main started; it fails t (never skips) when there is none.
func Shared(t testing.TB) *Server {
	t.Helper()
	if shared == nil {
		t.Fatalf("etcd test server unavailable: %v; these tests need a real etcd binary: run hack/envtest-assets.sh "+
			"(make envtest-assets) and set ETCD_BIN, e.g. ETCD_BIN=$PWD/bin/k8s/v1.37.2-etcdv3.7.3/etcd go test ./...", errShared)
	}
	return shared
}
