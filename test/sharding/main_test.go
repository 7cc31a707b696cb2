// Package sharding tests --sharding=lease with three registrar processes (built from ./cmd)
// on one envtest control plane and one real etcd store: registries spread over the
// replicas, a replica killed (its shards taken over), a replica added (shards handed over
// by drain-then-acknowledge), a replica stopped cleanly; throughout, a separate etcd client
// watches the store and the test asserts that no endpoint was deleted and none written twice.
package sharding

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/proc"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

var (
	k8s       client.Client
	kubeconf  string
	binary    string
	storeURL  string
	storeSrv  *etcdtest.Server
	setupFail error
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	logf.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "registrar-sharding-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if os.Getenv("KUBEBUILDER_ASSETS") == "" || os.Getenv("ETCD_BIN") == "" {
		setupFail = fmt.Errorf("KUBEBUILDER_ASSETS and ETCD_BIN must be set (make test does)")
		return m.Run()
	}
	if binary, err = proc.BuildRegistrar(dir); err != nil {
		setupFail = err
		return m.Run()
	}
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		setupFail = err
		return m.Run()
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	kubeconf = filepath.Join(dir, "kubeconfig")
	if err := env.WriteAdminKubeconfig("sharding-admin", kubeconf); err != nil {
		setupFail = err
		return m.Run()
	}
	storeSrv, err = etcdtest.Start(dir)
	if err != nil {
		setupFail = err
		return m.Run()
	}
	defer storeSrv.Stop()
	storeURL = storeSrv.Endpoint()
	return m.Run()
}

func requireSetup(t *testing.T) {
	t.Helper()
	if setupFail != nil {
		t.Fatalf("sharding suite setup: %v", setupFail)
	}
}
