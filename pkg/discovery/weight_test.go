package discovery_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// putWeighted writes the operator's value of a slow-start instance: weight 1 to 100.
func putWeighted(t *testing.T, srv string, service, pod, addr string, weight int32) {
	t.Helper()
	cli, err := clientv3New(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	v := endpoint(service, pod, addr)
	v["weight"] = weight
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key(service, pod), string(b)); err != nil {
		t.Fatal(err)
	}
}

// TestPickFollowsStoredWeights: with a real etcd, as a slow starter's stored weight steps
// up (10, 55, 100) beside an instance without a weight (full), the client's picks follow it:
// exactly weight/total of every cycle of round-robin picks.
func TestPickFollowsStoredWeights(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	put(t, cli, "ramp", "old", "10.9.0.1") // no weight: full
	putWeighted(t, srv.Endpoint(), "ramp", "new", "10.9.0.2", 10)
	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "ramp"})
	waitSynced(t, c)
	share := func() float64 {
		n := 0
		for range 1100 * 10 {
			inst, err := c.Pick()
			g.Expect(err).NotTo(HaveOccurred())
			if inst.Pod == "new" {
				n++
			}
		}
		return float64(n) / (1100 * 10)
	}
	g.Eventually(func() int32 { return weightOf(c, "new") }).WithTimeout(eventually).Should(Equal(int32(10)))
	discovery.SetRoundRobinCounter(c, 0)
	g.Expect(share()).To(BeNumerically("~", 10.0/110, 1e-9))
	for _, w := range []int32{55, 100} {
		putWeighted(t, srv.Endpoint(), "ramp", "new", "10.9.0.2", w)
		g.Eventually(func() int32 { return weightOf(c, "new") }).WithTimeout(eventually).Should(Equal(w))
		discovery.SetRoundRobinCounter(c, 0)
		total := 100 + int(w)
		n := 0
		for range total * 20 {
			inst, err := c.Pick()
			g.Expect(err).NotTo(HaveOccurred())
			if inst.Pod == "new" {
				n++
			}
		}
		g.Expect(n).To(Equal(int(w)*20), "weight %d: %d of %d picks", w, n, total*20)
	}
}

func weightOf(c *discovery.Client, pod string) int32 {
	for _, inst := range c.All() {
		if inst.Pod == pod {
			return inst.Weight
		}
	}
	return -1
}
