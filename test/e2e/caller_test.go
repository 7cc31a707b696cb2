//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
// current by a watch (push, no polling), as a well-behaved discovery client would. It logs
// every time an address joins or leaves the view (seen), exactly, from the watch events.
type targetSet struct {
	mu     sync.Mutex
	byID   map[string]string
	counts map[string]int // ids per address
	seen   *presence
}

func newTargetSet() *targetSet {
	return &targetSet{byID: map[string]string{}, counts: map[string]int{}, seen: newPresence()}
}

func (t *targetSet) set(id, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byID[id]; ok {
		if old == addr {
			return
		}
		delete(t.byID, id)
		t.counts[old]--
		if t.counts[old] == 0 {
			delete(t.counts, old)
			t.seen.change(old, false)
		}
	}
	if addr == "" {
		return
	}
	t.byID[id] = addr
	t.counts[addr]++
	if t.counts[addr] == 1 {
		t.seen.change(addr, true)
	}
}

func (t *targetSet) list() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.counts))
	for a := range t.counts {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// watchStore follows an etcd prefix; decode turns a value into an address ("" to skip).
func watchStore(ctx context.Context, prefix string, decode func([]byte) string) *targetSet {
	GinkgoHelper()
	t := newTargetSet()
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
	t := newTargetSet()
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
// With retry, a failed request is sent once more to another instance of the list (the
// baseline defence of seeds and users) and counts as failed only when that fails too.
type load struct {
	retry                                       bool
	ok, failed, afterSigterm, noTarget, retried atomic.Int64
	errMu                                       sync.Mutex
	firstErrs                                   []string

	addrMu sync.Mutex
	byAddr map[string]*addrResults // results per target address (first attempts only)
}

// addrResults is what one address answered: the last success and the first failure since
// the caller was told about a fault (markFault).
type addrResults struct {
	lastOK, firstFail time.Time
	okAfterFail       time.Time // the first success after firstFail
	lastFail          time.Time
	okAfterLastFail   time.Time // the first success after the latest failure: recovered for good
	fails             int
}

func startLoad(ctx context.Context, targets *targetSet, rps int) (*load, func()) {
	return startLoadWith(ctx, targets, rps, false)
}

func startLoadWith(ctx context.Context, targets *targetSet, rps int, retry bool) (*load, func()) {
	l := &load{retry: retry, byAddr: map[string]*addrResults{}}
	ctx, cancel := context.WithCancel(ctx)
	httpc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var wg sync.WaitGroup
	slots := make(chan struct{}, 256)
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
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				err := l.send(httpc, addr)
				l.record(addr, err)
				if err != nil && l.retry {
					if other := otherThan(targets.list(), addr); other != "" {
						l.retried.Add(1)
						err = l.send(httpc, other)
					}
				}
				if err != nil {
					l.fail(err.Error())
					return
				}
				l.ok.Add(1)
			}()
		}
	}()
	return l, func() { cancel(); wg.Wait() }
}

// otherThan is the instance after addr in list (round robin), "" when there is no other.
func otherThan(list []string, addr string) string {
	for i, a := range list {
		if a == addr {
			if len(list) > 1 {
				return list[(i+1)%len(list)]
			}
			return ""
		}
	}
	if len(list) > 0 {
		return list[0]
	}
	return ""
}

func (l *load) send(c *http.Client, addr string) error {
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.Header.Get("X-After-Sigterm") == "true" {
		l.afterSigterm.Add(1)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: HTTP %d", addr, resp.StatusCode)
	}
	return nil
}

func (l *load) record(addr string, err error) {
	now := time.Now()
	l.addrMu.Lock()
	defer l.addrMu.Unlock()
	r := l.byAddr[addr]
	if r == nil {
		r = &addrResults{}
		l.byAddr[addr] = r
	}
	if err == nil {
		r.lastOK = now
		if !r.firstFail.IsZero() && r.okAfterFail.IsZero() {
			r.okAfterFail = now
		}
		if r.lastFail.After(r.okAfterLastFail) {
			r.okAfterLastFail = now
		}
		return
	}
	r.lastFail = now
	r.fails++
	if r.firstFail.IsZero() {
		r.firstFail = now
	}
}

// markFault forgets the failures seen so far: firstFail is then the first after the fault.
func (l *load) markFault() {
	l.addrMu.Lock()
	defer l.addrMu.Unlock()
	for _, r := range l.byAddr {
		*r = addrResults{lastOK: r.lastOK}
	}
}

func (l *load) results(addr string) addrResults {
	l.addrMu.Lock()
	defer l.addrMu.Unlock()
	if r := l.byAddr[addr]; r != nil {
		return *r
	}
	return addrResults{}
}

func (l *load) fail(msg string) {
	l.failed.Add(1)
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if len(l.firstErrs) < 5 {
		l.firstErrs = append(l.firstErrs, msg)
	}
}

func (l *load) requests() int64 { return l.ok.Load() + l.failed.Load() }

func (l *load) String() string {
	return fmt.Sprintf("ok=%d failed=%d after-SIGTERM=%d no-target=%d retried=%d first errors=%q",
		l.ok.Load(), l.failed.Load(), l.afterSigterm.Load(), l.noTarget.Load(), l.retried.Load(), l.firstErrs)
}

// presence is the log of an address set: per address, the times it joined and left.
type presence struct {
	mu      sync.Mutex
	present map[string]bool
	changes map[string][]presenceChange
}

type presenceChange struct {
	at      time.Time
	present bool
}

func newPresence() *presence {
	return &presence{present: map[string]bool{}, changes: map[string][]presenceChange{}}
}

func (p *presence) change(addr string, present bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.present[addr] = present
	p.changes[addr] = append(p.changes[addr], presenceChange{time.Now(), present})
}

// leftAfter is when addr first left the list after t (zero: it has not).
func (p *presence) leftAfter(addr string, t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.changes[addr] {
		if !c.present && !c.at.Before(t) {
			return c.at
		}
	}
	return time.Time{}
}

// lastRejoined is when addr was last listed again after leaving the list at or after t
// (zero: it has not).
func (p *presence) lastRejoined(addr string, t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out time.Time
	left := false
	for _, c := range p.changes[addr] {
		if c.at.Before(t) {
			continue
		}
		if !c.present {
			left = true
		} else if left {
			out = c.at
		}
	}
	return out
}

func (p *presence) isPresent(addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.present[addr]
}
