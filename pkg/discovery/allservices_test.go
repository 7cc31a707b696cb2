package discovery_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// TestAllServices: a client with Config.AllServices lists and follows the instances of every
// service under the prefix, and skips the operator's own keys and keys of no instance.
func TestAllServices(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	put(t, cli, "orders", "o1", "10.36.0.1")
	put(t, cli, "billing", "b1", "10.36.0.2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Neither of these is an instance: the reserved subtree and a key one level too deep.
	_, err := cli.Put(ctx, wire.ReservedKey("", "canary", "x"), `{"address":"10.36.9.9"}`)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cli.Put(ctx, discovery.DefaultPrefix+"/orders/ns/o1/extra", `{"address":"10.36.9.8"}`)
	g.Expect(err).NotTo(HaveOccurred())

	c := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, AllServices: true, IgnoreHeartbeat: true})
	waitSynced(t, c)
	services := func() []string {
		var out []string
		for _, inst := range c.All() {
			out = append(out, inst.Service+"/"+inst.Pod)
		}
		return out
	}
	g.Expect(services()).To(Equal([]string{"billing/b1", "orders/o1"}))
	g.Expect(c.Stats().Undecodable).To(BeZero())

	put(t, cli, "payments", "p1", "10.36.0.3")
	_, err = cli.Put(ctx, wire.ReservedKey("", "canary", "y"), `{"address":"10.36.9.7"}`)
	g.Expect(err).NotTo(HaveOccurred())
	del(t, cli, "orders", "o1")
	g.Eventually(services).WithTimeout(eventually).Should(Equal([]string{"billing/b1", "payments/p1"}))
	g.Expect(c.Stats().Undecodable).To(BeZero())
}

func TestAllServicesConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  discovery.Config
		err  string
	}{
		{"with a service", discovery.Config{AllServices: true, Service: "x"}, "Config.AllServices"},
		{"with a namespace", discovery.Config{AllServices: true, Namespace: "ns"}, "Config.AllServices"},
		{"neither", discovery.Config{}, "Config.Service is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.cfg.Endpoints = []string{"http://127.0.0.1:1"}
			_, err := discovery.New(tc.cfg)
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
	c, err := discovery.New(discovery.Config{Endpoints: []string{"http://127.0.0.1:1"}, AllServices: true})
	if err != nil {
		t.Fatalf("AllServices alone: %v", err)
	}
	_ = c.Close()
}
