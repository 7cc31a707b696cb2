//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/internal/store"
)

// targetSet is the caller's view of a service: addresses (ip:port) it may send to, kept
// current by a watch (push, no polling), as a well-behaved discovery client would.
type targetSet struct {
	mu   sync.Mutex
	byID map[string]string
}

func (t *targetSet) set(id, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if addr == "" {
		delete(t.byID, id)
		return
	}
	t.byID[id] = addr
}

func (t *targetSet) list() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.byID))
	for _, a := range t.byID {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// watchStore follows an etcd prefix; decode turns a value into an address ("" to skip).
func watchStore(ctx context.Context, prefix string, decode func([]byte) string) *targetSet {
	GinkgoHelper()
	t := &targetSet{byID: map[string]string{}}
	resp, err := storeClient.Get(ctx, prefix, clientv3.WithPrefix())
	Expect(err).NotTo(HaveOccurred())
	for _, kv := range resp.Kvs {
		t.set(string(kv.Key), decode(kv.Value))
	}
	wch := storeClient.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	go func() {
		for r := range wch {
			for _, ev := range r.Events {
				if ev.Type == clientv3.EventTypeDelete {
					t.set(string(ev.Kv.Key), "")
				} else {
					t.set(string(ev.Kv.Key), decode(ev.Kv.Value))
				}
			}
		}
	}()
	return t
}

// registrarAddress reads registrar's endpoint value: address and the "http" port.
func registrarAddress(v []byte) string {
	var ep store.Endpoint
	if json.Unmarshal(v, &ep) != nil || ep.Ports["http"] == 0 {
		return ""
	}
	return net.JoinHostPort(ep.Address, strconv.Itoa(int(ep.Ports["http"])))
}

// selfRegisteredAddress reads the demo app's own TTL registration.
func selfRegisteredAddress(v []byte) string {
	var rec struct {
		Address string `json:"address"`
	}
	if json.Unmarshal(v, &rec) != nil {
		return ""
	}
	return rec.Address
}

// watchEndpointSlices follows the ready endpoints of a Service, as kube-proxy would.
func watchEndpointSlices(ctx context.Context, ns, service string, port int) *targetSet {
	GinkgoHelper()
	t := &targetSet{byID: map[string]string{}}
	w, err := k8s.Watch(ctx, &discoveryv1.EndpointSliceList{}, client.InNamespace(ns),
		client.MatchingLabels{discoveryv1.LabelServiceName: service})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			slice, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			for _, e := range slice.Endpoints {
				ready := ev.Type != watch.Deleted && e.Conditions.Ready != nil && *e.Conditions.Ready
				for _, ip := range e.Addresses {
					addr := ""
					if ready {
						addr = net.JoinHostPort(ip, strconv.Itoa(port))
					}
					t.set(slice.Name+"/"+ip, addr)
				}
			}
		}
	}()
	return t
}

// load is a steady stream of requests from outside the cluster, round-robin over the
// caller's current targets. It counts failures and responses from pods already told to stop.
type load struct {
	ok, failed, afterSigterm, noTarget atomic.Int64
	errMu                              sync.Mutex
	firstErrs                          []string
}

func startLoad(ctx context.Context, targets *targetSet, rps int) (*load, func()) {
	l := &load{}
	ctx, cancel := context.WithCancel(ctx)
	httpc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var wg sync.WaitGroup
	slots := make(chan struct{}, 64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rps))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			list := targets.list()
			if len(list) == 0 {
				l.noTarget.Add(1)
				continue
			}
			addr := list[n%len(list)]
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				l.send(httpc, addr)
			}()
		}
	}()
	return l, func() { cancel(); wg.Wait() }
}

func (l *load) send(c *http.Client, addr string) {
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		l.fail(err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-After-Sigterm") == "true" {
		l.afterSigterm.Add(1)
	}
	if resp.StatusCode >= 300 {
		l.fail(fmt.Sprintf("%s: HTTP %d", addr, resp.StatusCode))
		return
	}
	l.ok.Add(1)
}

func (l *load) fail(msg string) {
	l.failed.Add(1)
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if len(l.firstErrs) < 5 {
		l.firstErrs = append(l.firstErrs, msg)
	}
}

func (l *load) String() string {
	return fmt.Sprintf("ok=%d failed=%d after-SIGTERM=%d no-target=%d first errors=%q",
		l.ok.Load(), l.failed.Load(), l.afterSigterm.Load(), l.noTarget.Load(), l.firstErrs)
}
