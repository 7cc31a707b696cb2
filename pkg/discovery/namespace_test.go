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
)

// TestNamespaceScope: a client scoped to one namespace (Config.Namespace) lists and follows
// only the instances of its service registered from that namespace; one without a scope
// sees every namespace's (issue 34: another namespace's registry of the same service name).
func TestNamespaceScope(t *testing.T) {
	g := NewWithT(t)
	srv := requireServer(t)
	cli := storeClient(t, srv)
	putIn := func(ns, pod, addr string) {
		t.Helper()
		ep := endpoint("orders", pod, addr)
		ep["namespace"] = ns
		value, err := json.Marshal(ep)
		g.Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = cli.Put(ctx, path.Join(discovery.DefaultPrefix, "orders", ns, pod), string(value))
		g.Expect(err).NotTo(HaveOccurred())
	}
	putIn("shop", "a", "10.34.0.1")
	putIn("shop-b", "b", "10.34.0.2") // "shop-b" starts with "shop": the scope is the directory
	putIn("other", "c", "10.34.0.3")

	scoped := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "orders", Namespace: "shop"})
	all := newClient(t, discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "orders"})
	waitSynced(t, scoped)
	waitSynced(t, all)
	g.Expect(pods(scoped)).To(Equal([]string{"a"}))
	g.Eventually(func() []string { return pods(all) }).WithTimeout(eventually).Should(ConsistOf("a", "b", "c"))
	inst, err := scoped.Pick()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inst.Namespace).To(Equal("shop"))

	// Changes in other namespaces never reach the scoped client; its own do.
	putIn("other", "d", "10.34.0.4")
	putIn("shop", "e", "10.34.0.5")
	g.Eventually(func() []string { return pods(scoped) }).WithTimeout(eventually).Should(Equal([]string{"a", "e"}))
	g.Eventually(func() []string { return pods(all) }).WithTimeout(eventually).Should(ConsistOf("a", "b", "c", "d", "e"))
	g.Consistently(func() []string { return pods(scoped) }).WithTimeout(500 * time.Millisecond).Should(Equal([]string{"a", "e"}))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cli.Delete(ctx, path.Join(discovery.DefaultPrefix, "orders", "shop")+"/", clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() []string { return pods(scoped) }).WithTimeout(eventually).Should(BeEmpty())
	g.Eventually(func() []string { return pods(all) }).WithTimeout(eventually).Should(ConsistOf("b", "c", "d"))
}

func TestNamespaceScopeRejectsAPath(t *testing.T) {
	g := NewWithT(t)
	for _, ns := range []string{"a/b", ".registrar"} {
		_, err := discovery.New(discovery.Config{Endpoints: []string{"http://127.0.0.1:1"}, Service: "x", Namespace: ns})
		g.Expect(err).To(MatchError(ContainSubstring("Config.Namespace")), ns)
	}
}

func TestScopePrefix(t *testing.T) {
	g := NewWithT(t)
	g.Expect(discovery.ScopePrefix("", "orders", "shop")).To(Equal("/registrar/services/orders/shop/"))
	g.Expect(discovery.ScopePrefix("/p/", "orders", "shop")).To(Equal("/p/orders/shop/"))
}
