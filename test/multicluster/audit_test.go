package multicluster_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/pkg/wire"
)

func hostPort(endpoint string) string {
	u, err := url.Parse(endpoint)
	Expect(err).NotTo(HaveOccurred())
	return u.Host
}

// keyCluster is the cluster whose key key is, and whether it is an endpoint key; reserved
// keys of a cluster (its fence and lease) count as that cluster's, the layout marker as
// everybody's ("*").
func keyCluster(key string) (cluster string, endpoint bool) {
	if key == wire.LayoutKey(storePrefix) {
		return "*", false
	}
	if rest, ok := strings.CutPrefix(key, wire.ClustersDir(storePrefix)+"/"); ok {
		c, _, _ := strings.Cut(rest, "/")
		return c, false
	}
	rest, ok := strings.CutPrefix(key, storePrefix+"/")
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return "", false
	}
	c, _, ok := wire.SplitClusterPod(parts[2])
	if !ok {
		return "", true
	}
	return c, true
}

// auditKV is a registrar's store client that records every key it asks the store to put or
// delete (puts and deletes, alone or in transactions): the writer's side of the
// cross-cluster invariant.
type auditKV struct {
	*clientv3.Client
	cluster string

	mu      sync.Mutex
	foreign []string // mutations of keys that are not this cluster's
	writes  int
}

func newAuditKV(cli *clientv3.Client, cluster string) *auditKV {
	return &auditKV{Client: cli, cluster: cluster}
}

func (a *auditKV) record(op string, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writes++
	if c, _ := keyCluster(key); c != a.cluster && c != "*" {
		a.foreign = append(a.foreign, op+" "+key)
	}
}

func (a *auditKV) recordOps(ops []clientv3.Op) {
	for _, op := range ops {
		switch {
		case op.IsPut():
			a.record("put", string(op.KeyBytes()))
		case op.IsDelete():
			a.record("delete", string(op.KeyBytes()))
		case op.IsTxn():
			cmps, thens, elses := op.Txn()
			_ = cmps
			a.recordOps(thens)
			a.recordOps(elses)
		}
	}
}

// Foreign returns the mutations of other clusters' keys this client sent.
func (a *auditKV) Foreign() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.foreign...)
}

func (a *auditKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	a.record("put", key)
	return a.Client.Put(ctx, key, val, opts...)
}

func (a *auditKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	a.record("delete", key)
	return a.Client.Delete(ctx, key, opts...)
}

func (a *auditKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	a.recordOps([]clientv3.Op{op})
	return a.Client.Do(ctx, op)
}

func (a *auditKV) Txn(ctx context.Context) clientv3.Txn {
	return &auditTxn{Txn: a.Client.Txn(ctx), a: a}
}

type auditTxn struct {
	clientv3.Txn
	a *auditKV
}

func (t *auditTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *auditTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.a.recordOps(ops)
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *auditTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.a.recordOps(ops)
	t.Txn = t.Txn.Else(ops...)
	return t
}

// event is one change of an endpoint key as the separate watcher saw it.
type event struct {
	Key, Cluster string // Cluster: the key's
	Deleted      bool
	Lease        int64
	ValueCluster string
	Revision     int64
}

// storeWatch watches the whole prefix with its own client and checks every put of an
// endpoint key: its value names the key's cluster, and it carries a lease that cluster
// recorded as its own ({prefix}/.registrar/clusters/{cluster}/lease). A put by another
// cluster's registrar would carry that registrar's lease.
type storeWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	leases     map[int64]string // lease ID -> the cluster that recorded it
	events     []event
	violations []string
}

func startWatch(cli *clientv3.Client) *storeWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &storeWatch{cancel: cancel, done: make(chan struct{}), leases: map[int64]string{}}
	ch := cli.Watch(clientv3.WithRequireLeader(ctx), storePrefix+"/", clientv3.WithPrefix())
	go func() {
		defer close(w.done)
		for resp := range ch {
			for _, ev := range resp.Events {
				w.observe(ev)
			}
		}
	}()
	return w
}

func (w *storeWatch) observe(ev *clientv3.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := string(ev.Kv.Key)
	if c, _, ok := strings.Cut(strings.TrimPrefix(key, wire.ClustersDir(storePrefix)+"/"), "/lease"); ok && strings.HasPrefix(key, wire.ClustersDir(storePrefix)+"/") {
		if ev.Type == clientv3.EventTypePut {
			if id, err := strconv.ParseInt(string(ev.Kv.Value), 16, 64); err == nil {
				w.leases[id] = c
			}
		}
		return
	}
	cluster, endpoint := keyCluster(key)
	if !endpoint {
		return
	}
	e := event{Key: key, Cluster: cluster, Deleted: ev.Type == clientv3.EventTypeDelete, Lease: ev.Kv.Lease, Revision: ev.Kv.ModRevision}
	if !e.Deleted {
		v, err := wire.Decode(ev.Kv.Value)
		e.ValueCluster = v.Cluster
		switch {
		case err != nil:
			w.violations = append(w.violations, fmt.Sprintf("undecodable put of %s", key))
		case v.Cluster != cluster:
			w.violations = append(w.violations, fmt.Sprintf("put of %s names cluster %q", key, v.Cluster))
		case w.leases[ev.Kv.Lease] != cluster:
			w.violations = append(w.violations, fmt.Sprintf("put of %s (rev %d) with lease %x, which is cluster %q's", key, ev.Kv.ModRevision, ev.Kv.Lease, w.leases[ev.Kv.Lease]))
		}
	}
	w.events = append(w.events, e)
}

func (w *storeWatch) stop() {
	w.cancel()
	<-w.done
}

// Violations are the puts that broke the invariant so far.
func (w *storeWatch) Violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...)
}

// Since returns the endpoint events seen after revision rev.
func (w *storeWatch) Since(rev int64) []event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []event
	for _, e := range w.events {
		if e.Revision > rev || (e.Deleted && e.Revision == 0) {
			out = append(out, e)
		}
	}
	return out
}

// expectClean fails when any registrar touched another cluster's key or the watcher saw a
// put out of place.
func expectClean() {
	GinkgoHelper()
	for id, m := range clusters {
		if m.op != nil {
			Expect(m.op.audit.Foreign()).To(BeEmpty(), "cluster %s's registrar mutated keys of other clusters", id)
		}
	}
	Expect(watch.Violations()).To(BeEmpty())
}
