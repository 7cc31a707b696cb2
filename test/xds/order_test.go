package xds_test

import (
	"context"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// holdingStore is the real etcd store with one test hook: an Apply to a service the test
// holds waits (without writing) until the test releases it, as a store that takes long to
// answer would. Everything else is the etcd store's own.
type holdingStore struct {
	*etcdstore.Store
	mu   sync.Mutex
	held map[store.Scope]*hold
}

// hold is one held service: entered is closed when an Apply to it is waiting.
type hold struct {
	entered, release chan struct{}
	once             sync.Once
}

func newHoldingStore(s *etcdstore.Store) *holdingStore {
	return &holdingStore{Store: s, held: map[store.Scope]*hold{}}
}

// hold makes Apply to the scope wait until the returned func is called (also at cleanup).
func (h *holdingStore) hold(scope store.Scope) (*hold, func()) {
	hd := &hold{entered: make(chan struct{}), release: make(chan struct{})}
	h.mu.Lock()
	h.held[scope] = hd
	h.mu.Unlock()
	release := func() {
		h.mu.Lock()
		delete(h.held, scope)
		h.mu.Unlock()
		close(hd.release)
	}
	var once sync.Once
	DeferCleanup(func() { once.Do(release) })
	return hd, func() { once.Do(release) }
}

func (h *holdingStore) Apply(ctx context.Context, scope store.Scope, c store.Changes) ([]store.Record, error) {
	h.mu.Lock()
	hd := h.held[scope]
	h.mu.Unlock()
	if hd != nil {
		hd.once.Do(func() { close(hd.entered) })
		select {
		case <-hd.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.Store.Apply(ctx, scope, c)
}

// storedPods reads the pods of a service from the store with a client of its own.
func storedPods(service, ns string) []string {
	GinkgoHelper()
	cli, err := storeServer.Client()
	Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	prefix := wire.ScopePrefix(storePrefix, service, ns)
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	Expect(err).NotTo(HaveOccurred())
	var pods []string
	for _, kv := range resp.Kvs {
		pods = append(pods, strings.TrimPrefix(string(kv.Key), prefix))
	}
	return pods
}

var _ = Describe("xDS publish order", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("takes a pod out of xDS while the store write that removes it is still waiting", func() {
		port, _ := startBackends(40, "ord-1", "ord-2")
		newRegistry(ns, "ord", "ord", port)
		p1, p2 := newPod(ns, "ord-1", "ord"), newPod(ns, "ord-2", "ord")
		setReady(p1, "127.0.0.40", true)
		setReady(p2, "127.0.0.41", true)
		name := "ord." + ns
		Eventually(func() map[string]string { return published(name) }).WithTimeout(timeout).WithPolling(poll).
			Should(Equal(map[string]string{"ord-1": "HEALTHY", "ord-2": "HEALTHY"}))
		Eventually(func() []string { return storedPods("ord", ns) }).WithTimeout(timeout).WithPolling(poll).
			Should(ConsistOf("ord-1", "ord-2"))

		held, release := operator.store.hold(store.Scope{Service: "ord", Namespace: ns})
		setReady(p2, "127.0.0.41", false)
		Eventually(held.entered).WithTimeout(timeout).Should(BeClosed(), "the store write removing ord-2 started")
		Eventually(func() map[string]string { return published(name) }).WithTimeout(timeout).WithPolling(poll).
			Should(Equal(map[string]string{"ord-1": "HEALTHY"}), "xDS must not wait for the store's answer")
		Expect(storedPods("ord", ns)).To(ConsistOf("ord-1", "ord-2"), "the store write is still held")

		release()
		Eventually(func() []string { return storedPods("ord", ns) }).WithTimeout(timeout).WithPolling(poll).
			Should(ConsistOf("ord-1"))
		Expect(published(name)).To(Equal(map[string]string{"ord-1": "HEALTHY"}))
	})
})
