package discovery_test

import (
	"context"
	"encoding/json"
	"path"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// putAt writes an endpoint of cluster and zone in the shared layout
// ({prefix}/{service}/ns/{cluster}.{pod}), as a registrar with --store-shared does.
func putAt(t *testing.T, cli *clientv3.Client, service, cluster, zone, pod, addr string) {
	t.Helper()
	v := endpoint(service, pod, addr)
	v["cluster"], v["zone"] = cluster, zone
	value, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, wire.ClusterKey(discovery.DefaultPrefix, cluster, service, "ns", pod), string(value)); err != nil {
		t.Fatal(err)
	}
}

func delAt(t *testing.T, cli *clientv3.Client, service, cluster, pod string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, path.Join(wire.ScopePrefix(discovery.DefaultPrefix, service, "ns"), wire.ClusterPod(cluster, pod))); err != nil {
		t.Fatal(err)
	}
}

// picked is the set of pods (cluster/pod) n picks returned.
func picked(g Gomega, c *discovery.Client, n int) map[string]int {
	out := map[string]int{}
	for range n {
		inst, err := c.Pick()
		g.Expect(err).NotTo(HaveOccurred())
		out[inst.Cluster+"/"+inst.Pod]++
	}
	return out
}

func TestLocalityPrefersClusterThenZoneThenAny(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	putAt(t, cli, "near", "east", "z1", "a", "10.1.0.1")
	putAt(t, cli, "near", "east", "z2", "b", "10.1.0.2")
	putAt(t, cli, "near", "west", "z1", "a", "10.2.0.1") // same pod name, other cluster
	putAt(t, cli, "near", "west", "z3", "c", "10.2.0.3")
	c := newClient(t, discovery.Config{
		Endpoints: []string{srv.Endpoint()}, Service: "near", MaxEjectionPercent: 100, EjectionTime: time.Hour,
		Locality: discovery.Locality{Cluster: "east", Zone: "z1"},
	})
	waitSynced(t, c)
	g.Expect(c.All()).To(HaveLen(4), "both clusters' instances are listed, same pod name included")
	g.Expect(picked(g, c, 100)).To(Equal(map[string]int{"east/a": 50, "east/b": 50}), "same cluster first, round-robin within it")

	// Every local instance ejected: the same zone in another cluster, then any.
	for _, inst := range c.All() {
		if inst.Cluster == "east" {
			g.Expect(c.ReportFailure(inst)).To(BeTrue())
		}
	}
	g.Expect(picked(g, c, 10)).To(Equal(map[string]int{"west/a": 10}), "local set ejected: same zone next")
	for _, inst := range c.All() {
		if inst.Cluster == "west" && inst.Pod == "a" {
			g.Expect(c.ReportFailure(inst)).To(BeTrue())
		}
	}
	g.Expect(picked(g, c, 10)).To(Equal(map[string]int{"west/c": 10}), "then any")

	// A fresh client: the local set empties in the store, the caller goes remote, and
	// comes back when a local instance returns.
	c2 := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "near", Locality: discovery.Locality{Cluster: "east", Zone: "z1"}})
	waitSynced(t, c2)
	delAt(t, cli, "near", "east", "a")
	delAt(t, cli, "near", "east", "b")
	g.Eventually(func() map[string]int { return picked(g, c2, 4) }).WithTimeout(eventually).Should(Equal(map[string]int{"west/a": 4}))
	putAt(t, cli, "near", "east", "z2", "d", "10.1.0.4")
	g.Eventually(func() map[string]int { return picked(g, c2, 4) }).WithTimeout(eventually).Should(Equal(map[string]int{"east/d": 4}))

	// ZoneOnly ignores the cluster; NoPreference spreads over all.
	z := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "near", Locality: discovery.Locality{Cluster: "east", Zone: "z3", Order: discovery.ZoneOnly}})
	waitSynced(t, z)
	g.Expect(picked(g, z, 10)).To(Equal(map[string]int{"west/c": 10}))
	any := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "near", Locality: discovery.Locality{Cluster: "east", Order: discovery.NoPreference}})
	waitSynced(t, any)
	g.Expect(picked(g, any, 30)).To(HaveLen(3))
}

func TestLocalityTier(t *testing.T) {
	inst := func(cluster, zone string) discovery.Instance {
		return discovery.Instance{Endpoint: wire.Endpoint{Cluster: cluster, Zone: zone}}
	}
	for _, tc := range []struct {
		l    discovery.Locality
		inst discovery.Instance
		want int
	}{
		{discovery.Locality{Cluster: "e", Zone: "z1"}, inst("e", "z9"), 0},
		{discovery.Locality{Cluster: "e", Zone: "z1"}, inst("w", "z1"), 1},
		{discovery.Locality{Cluster: "e", Zone: "z1"}, inst("w", "z2"), 2},
		{discovery.Locality{Cluster: "e"}, inst("w", ""), 2},
		{discovery.Locality{Zone: "z1"}, inst("", "z1"), 1},
		{discovery.Locality{Zone: "z1", Order: discovery.ZoneOnly}, inst("w", "z1"), 0},
		{discovery.Locality{Zone: "z1", Order: discovery.ZoneOnly}, inst("e", "z2"), 1},
		{discovery.Locality{Cluster: "e", Order: discovery.NoPreference}, inst("w", "z2"), 0},
	} {
		if got := tc.l.Tier(tc.inst); got != tc.want {
			t.Errorf("%+v.Tier(%s/%s) = %d, want %d", tc.l, tc.inst.Cluster, tc.inst.Zone, got, tc.want)
		}
	}
}
