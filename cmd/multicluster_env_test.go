package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/pkg/wire"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

// TestClusterIdentityResolved: the derived cluster ID is the kube-system namespace UID of a
// real API server, the installation is that UID and the operator's namespace, and a
// single-cluster installation refuses a prefix laid out for several clusters.
func TestClusterIdentityResolved(t *testing.T) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ks corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ks); err != nil {
		t.Fatal(err)
	}
	uid := string(ks.UID)
	if err := wire.ValidateClusterID(uid); err != nil {
		t.Fatalf("a namespace UID must be a valid cluster ID: %v", err)
	}

	var derived clusterConfig
	if err := derived.resolve(ctx, env.Config, "", "registrar-system"); err != nil {
		t.Fatal(err)
	}
	if derived.id != uid || derived.installation != uid+"/registrar-system" {
		t.Errorf("derived id %q, installation %q; want the kube-system UID %q", derived.id, derived.installation, uid)
	}
	named := clusterConfig{}
	if err := named.resolve(ctx, env.Config, "prod-eu", "ns"); err != nil || named.id != "prod-eu" {
		t.Errorf("--cluster-name: id %q, err %v", named.id, err)
	}
	shared := clusterConfig{clusterID: "east", shared: true}
	if err := shared.resolve(ctx, env.Config, "prod-eu", "ns"); err != nil || shared.id != "east" || shared.storeCluster() != "east" {
		t.Errorf("--cluster-id with --store-shared: id %q, store cluster %q, err %v", shared.id, shared.storeCluster(), err)
	}

	srv, err := etcdtest.Start(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	fence, err := shared.newFence(ctx, cli, "/p", "ns", "me", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if fence.Key() != wire.ClusterFenceKey("/p", "east") {
		t.Errorf("shared fence key %q", fence.Key())
	}
	if err := fence.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := derived.newFence(ctx, cli, "/p", "ns", "me", 2*time.Second); err == nil || !strings.Contains(err.Error(), "--store-shared") {
		t.Errorf("single-cluster installation on a shared prefix: err = %v, want a refusal naming --store-shared", err)
	}
	if _, err := derived.newFence(ctx, cli, "/other", "ns", "me", 2*time.Second); err != nil {
		t.Errorf("single-cluster installation on its own prefix: %v", err)
	}
}
