package ctl_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/ctl"
	"github.com/registrar-dev/registrar/pkg/wire"
)

const mcPrefix = "/mc"

// seedClusters writes what two registrars with --store-shared leave in a store: east alive
// (its lease kept), west gone (its lease expired, its last record not yet collected: seeded
// without a lease), and a lease-less cluster "legacy" of a single-cluster installation.
func seedClusters(t *testing.T) {
	t.Helper()
	requireServer(t)
	cli, err := server.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, mcPrefix+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	alive, err := cli.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	ep := func(cluster, service, pod, addr, zone string) string {
		b, _ := json.Marshal(wire.Endpoint{Service: service, Namespace: "shop", Pod: pod, UID: "u-" + pod, Address: addr,
			Ports: map[string]int32{"http": 8080}, Zone: zone, Cluster: cluster, Owner: "sreg-" + cluster,
			RegisteredAt: time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)})
		return string(b)
	}
	puts := []struct{ key, value string }{
		{wire.LayoutKey(mcPrefix), wire.LayoutShared},
		{wire.ClusterFenceKey(mcPrefix, "east"), `{"installation":"0f1e2d3c-kube-system-uid/registrar-system","holder":"registrar-7f9c-0_1_1"}`},
		{wire.ClusterLeaseKey(mcPrefix, "east"), strconv.FormatInt(int64(alive.ID), 16)},
		{wire.ClusterFenceKey(mcPrefix, "west"), `{"installation":"9a8b7c6d-kube-system-uid/registrar-system","holder":"registrar-55d1-2_1_1"}`},
		{wire.ClusterLeaseKey(mcPrefix, "west"), strconv.FormatInt(int64(gone.ID), 16)},
		{wire.ClusterKey(mcPrefix, "east", "web", "shop", "web-0"), ep("east", "web", "web-0", "10.11.0.1", "eu-1a")},
		{wire.ClusterKey(mcPrefix, "east", "web", "shop", "web-1"), ep("east", "web", "web-1", "10.11.0.2", "eu-1b")},
		{wire.ClusterKey(mcPrefix, "west", "web", "shop", "web-0"), ep("west", "web", "web-0", "10.12.0.1", "us-1a")},
		{wire.ClusterKey(mcPrefix, "west", "api", "shop", "api-0"), ep("west", "api", "api-0", "10.12.0.9", "us-1a")},
		{wire.Key(mcPrefix, "api", "legacy", "api-7"), ep("legacy", "api", "api-7", "10.13.0.7", "")},
	}
	for _, p := range puts {
		if _, err := cli.Put(ctx, p.key, p.value); err != nil {
			t.Fatal(err)
		}
	}
}

// stable replaces what differs from run to run (lease IDs, what is left of a TTL).
func stable(s string) string {
	s = regexp.MustCompile(`\b[0-9a-f]{12,16}\b`).ReplaceAllString(s, "LEASE")
	s = regexp.MustCompile(`\b3[56][0-9]{2}s\b`).ReplaceAllString(s, "36XXs")
	s = regexp.MustCompile(`"ttlSeconds": 3[56][0-9]{2}`).ReplaceAllString(s, `"ttlSeconds": 36XX`)
	return regexp.MustCompile(` {2,}`).ReplaceAllString(s, "  ") // column widths follow the lease IDs' length
}

func TestClusters(t *testing.T) {
	seedClusters(t)
	vars := map[string]string{"REGISTRAR_STORE_ENDPOINTS": server.Endpoint(), "REGISTRAR_STORE_TIMEOUT": "30s", "REGISTRAR_STORE_PREFIX": mcPrefix}
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"clusters.golden", []string{"clusters"}},
		{"clusters-web.golden", []string{"clusters", "web"}},
		{"clusters-json.golden", []string{"clusters", "-o", "json"}},
		{"list-cluster-east.golden", []string{"list", "--cluster", "east"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			code, stdout, stderr := run(context.Background(), tt.args, vars)
			if code != ctl.ExitOK {
				t.Fatalf("exit %d, stderr %s", code, stderr)
			}
			golden(t, tt.golden, stable(stdout))
		})
	}
	if code, _, _ := run(context.Background(), []string{"clusters", "nothing"}, vars); code != ctl.ExitNotFound {
		t.Errorf("clusters of a service with no instances: exit %d, want %d", code, ctl.ExitNotFound)
	}
}
