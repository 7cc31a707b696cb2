package remote_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/xds/remote"
	"github.com/registrar-dev/registrar/pkg/wire"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, nil)) }

// sink records what the follower hands over: the latest set per registration and the
// number of hand-overs.
type sink struct {
	mu    sync.Mutex
	sets  map[string][]string // "service/namespace" → sorted "cluster.pod@address"
	calls int
}

func (s *sink) SetRemote(service, namespace string, recs []remote.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sets == nil {
		s.sets = map[string][]string{}
	}
	var set []string
	for _, r := range recs {
		set = append(set, r.Cluster+"."+r.Endpoint.Pod+"@"+r.Endpoint.Address)
	}
	sort.Strings(set)
	s.sets[service+"/"+namespace] = set
	s.calls++
}

func (s *sink) state() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.sets))
	for k, v := range s.sets {
		if len(v) > 0 {
			keys = append(keys, k+"="+strings.Join(v, ","))
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, " "), s.calls
}

func waitState(t *testing.T, s *sink, want string) int {
	t.Helper()
	g := gomega.NewWithT(t)
	var calls int
	g.Eventually(func() string {
		var got string
		got, calls = s.state()
		return got
	}).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(gomega.Equal(want))
	return calls
}

type fixture struct {
	t      *testing.T
	cli    *clientv3.Client
	prefix string
}

func newFixture(t *testing.T) fixture {
	cli, err := etcdtest.Shared(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return fixture{t: t, cli: cli, prefix: fmt.Sprintf("/%s-%d", strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"), time.Now().UnixNano())}
}

func (f fixture) put(cluster, service, ns, pod, ip string) int64 {
	f.t.Helper()
	v, _ := wire.Encode(&wire.Endpoint{Service: service, Namespace: ns, Pod: pod, Address: ip, Cluster: cluster, Ports: map[string]int32{"grpc": 9090}})
	resp, err := f.cli.Put(context.Background(), wire.ClusterKey(f.prefix, cluster, service, ns, pod), string(v))
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.Header.Revision
}

func (f fixture) del(cluster, service, ns, pod string) {
	f.t.Helper()
	if _, err := f.cli.Delete(context.Background(), wire.ClusterKey(f.prefix, cluster, service, ns, pod)); err != nil {
		f.t.Fatal(err)
	}
}

func (f fixture) start(store remote.Store, s *sink, cfg remote.Config) {
	cfg.Store, cfg.Prefix, cfg.Cluster, cfg.Sink, cfg.Log = store, f.prefix, "east", s, testr.New(f.t)
	fl := remote.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fl.Start(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				f.t.Errorf("follower: %v", err)
			}
		case <-time.After(10 * time.Second):
			f.t.Error("follower did not stop with its context")
		}
	})
}

func TestFollowsOtherClustersOnly(t *testing.T) {
	f := newFixture(t)
	f.put("west", "web", "shop", "web-0", "10.1.0.1")
	f.put("east", "web", "shop", "web-0", "10.0.0.1") // this cluster's own: skipped
	f.put("north", "api", "shop", "api-0", "10.2.0.1")
	// Not instances of another cluster: reserved keys, a value naming another cluster than
	// its key, an unreadable value, a key without a cluster part.
	ctx := context.Background()
	for k, v := range map[string]string{
		wire.ClusterFenceKey(f.prefix, "west"):                `{"installation":"x"}`,
		wire.ClusterKey(f.prefix, "west", "web", "shop", "x"): `{"pod":"x","address":"10.9.9.9","cluster":"north"}`,
		wire.ClusterKey(f.prefix, "west", "web", "shop", "y"): `not json`,
		wire.Key(f.prefix, "web", "shop", "plain"):            `{"pod":"plain","address":"10.9.9.8","cluster":"west"}`,
		wire.Key(f.prefix, "web", "shop", "too/deep.web-9"):   `{"pod":"web-9","cluster":"too"}`,
	} {
		if _, err := f.cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	s := &sink{}
	f.start(f.cli, s, remote.Config{})
	calls := waitState(t, s, "api/shop=north.api-0@10.2.0.1 web/shop=west.web-0@10.1.0.1")
	if calls != 2 {
		t.Errorf("first listing: %d hand-overs, want one per registration (2)", calls)
	}

	// Watched: one hand-over per changed registration.
	f.put("west", "web", "shop", "web-1", "10.1.0.2")
	calls2 := waitState(t, s, "api/shop=north.api-0@10.2.0.1 web/shop=west.web-0@10.1.0.1,west.web-1@10.1.0.2")
	f.put("east", "web", "shop", "web-1", "10.0.0.2") // own cluster: nothing handed over
	f.del("north", "api", "shop", "api-0")
	calls3 := waitState(t, s, "web/shop=west.web-0@10.1.0.1,west.web-1@10.1.0.2")
	if calls2 != calls+1 || calls3 != calls2+1 {
		t.Errorf("hand-overs %d → %d → %d: want one per change of another cluster's registration", calls, calls2, calls3)
	}
}

// gatedStore opens its watches only once gate is closed, so that the test can compact the
// store past the follower's listing first.
type gatedStore struct {
	*clientv3.Client
	gate    chan struct{}
	watches chan struct{}
}

func (g gatedStore) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	g.watches <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
	}
	return g.Client.Watch(ctx, key, opts...)
}

func TestCompactionListsAgain(t *testing.T) {
	f := newFixture(t)
	f.put("west", "web", "shop", "web-0", "10.1.0.1")
	g := gatedStore{Client: f.cli, gate: make(chan struct{}), watches: make(chan struct{}, 4)}
	s := &sink{}
	f.start(g, s, remote.Config{RetryBase: 10 * time.Millisecond})
	waitState(t, s, "web/shop=west.web-0@10.1.0.1")
	<-g.watches // the follower listed and is about to watch from the listing's revision
	f.put("west", "web", "shop", "web-1", "10.1.0.2")
	f.del("west", "web", "shop", "web-0")
	rev := f.put("west", "web", "shop", "web-2", "10.1.0.3")
	if _, err := f.cli.Compact(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	close(g.gate)
	waitState(t, s, "web/shop=west.web-1@10.1.0.2,west.web-2@10.1.0.3")
	select {
	case <-g.watches: // listed again, watching from the new listing
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not list and watch again after the compaction")
	}
}

func TestBounds(t *testing.T) {
	f := newFixture(t)
	for i := range 3 {
		f.put("west", "web", "shop", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.1.0.%d", i))
	}
	f.put("west", "api", "shop", "api-0", "10.1.1.0")
	s := &sink{}
	// Keys list in order: api/... first, then web/...: api-0 and web-0 fit, the rest not.
	f.start(f.cli, s, remote.Config{MaxRecords: 2})
	waitState(t, s, "api/shop=west.api-0@10.1.1.0 web/shop=west.web-0@10.1.0.0")

	f2 := newFixture(t)
	f2.prefix += "-regs"
	f2.put("west", "web", "shop", "web-0", "10.1.0.0")
	f2.put("west", "web", "shop", "web-1", "10.1.0.1")
	f2.put("west", "zz", "shop", "zz-0", "10.1.2.0")
	s2 := &sink{}
	f2.start(f2.cli, s2, remote.Config{MaxRegistrations: 1})
	waitState(t, s2, "web/shop=west.web-0@10.1.0.0,west.web-1@10.1.0.1")
	// A new registration beyond the bound stays out; one of the kept registration comes in.
	f2.put("west", "aa", "shop", "aa-0", "10.1.3.0")
	f2.put("west", "web", "shop", "web-2", "10.1.0.2")
	waitState(t, s2, "web/shop=west.web-0@10.1.0.0,west.web-1@10.1.0.1,west.web-2@10.1.0.2")
}

// countingStore counts the follower's listings.
type countingStore struct {
	*clientv3.Client
	lists *atomic.Int64
}

func (c countingStore) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.lists.Add(1)
	return c.Client.Get(ctx, key, opts...)
}

// TestRefusedComeBackWhenRoomFrees: records refused at the bounds, at the listing or on the
// watch, are served as soon as deletions make room, in key order, with their latest value,
// without a watch failure and without listing again; one deleted while refused does not
// come back.
func TestRefusedComeBackWhenRoomFrees(t *testing.T) {
	f := newFixture(t)
	f.put("west", "api", "shop", "api-0", "10.1.1.0")
	for i := range 3 {
		f.put("west", "web", "shop", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.1.0.%d", i))
	}
	var lists atomic.Int64
	s := &sink{}
	f.start(countingStore{Client: f.cli, lists: &lists}, s, remote.Config{MaxRecords: 2})
	waitState(t, s, "api/shop=west.api-0@10.1.1.0 web/shop=west.web-0@10.1.0.0")
	f.put("west", "web", "shop", "web-1", "10.1.0.11") // a refused record changes
	f.del("west", "web", "shop", "web-2")              // a refused record goes
	f.put("west", "web", "shop", "web-3", "10.1.0.3")  // refused on the watch

	f.del("west", "api", "shop", "api-0")
	waitState(t, s, "web/shop=west.web-0@10.1.0.0,west.web-1@10.1.0.11")
	f.del("west", "web", "shop", "web-0")
	waitState(t, s, "web/shop=west.web-1@10.1.0.11,west.web-3@10.1.0.3")
	if n := lists.Load(); n != 1 {
		t.Errorf("%d listings, want 1: the refused records were remembered", n)
	}

	f2 := newFixture(t)
	f2.prefix += "-regs"
	f2.put("west", "web", "shop", "web-0", "10.1.0.0")
	f2.put("west", "zz", "shop", "zz-0", "10.1.2.0")
	s2 := &sink{}
	f2.start(f2.cli, s2, remote.Config{MaxRegistrations: 1})
	waitState(t, s2, "web/shop=west.web-0@10.1.0.0")
	f2.put("west", "aa", "shop", "aa-0", "10.1.3.0") // a registration refused on the watch
	f2.del("west", "web", "shop", "web-0")
	waitState(t, s2, "aa/shop=west.aa-0@10.1.3.0")
	f2.del("west", "aa", "shop", "aa-0")
	waitState(t, s2, "zz/shop=west.zz-0@10.1.2.0")
}

// TestRefusedBeyondMemoryComeBack: more records are refused than the follower remembers
// (MaxRecords); those it forgot come back through a new listing once the remembered ones
// are served, one listing per MaxRecords refusals at most.
func TestRefusedBeyondMemoryComeBack(t *testing.T) {
	f := newFixture(t)
	for i := range 7 {
		f.put("west", "web", "shop", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.1.0.%d", i))
	}
	var lists atomic.Int64
	s := &sink{}
	f.start(countingStore{Client: f.cli, lists: &lists}, s, remote.Config{MaxRecords: 2})
	waitState(t, s, "web/shop=west.web-0@10.1.0.0,west.web-1@10.1.0.1")
	f.del("west", "web", "shop", "web-0")
	f.del("west", "web", "shop", "web-1")
	waitState(t, s, "web/shop=west.web-2@10.1.0.2,west.web-3@10.1.0.3")
	f.del("west", "web", "shop", "web-2")
	f.del("west", "web", "shop", "web-3")
	waitState(t, s, "web/shop=west.web-4@10.1.0.4,west.web-5@10.1.0.5")
	f.del("west", "web", "shop", "web-4")
	waitState(t, s, "web/shop=west.web-5@10.1.0.5,west.web-6@10.1.0.6")
	if n := lists.Load(); n > 3 {
		t.Errorf("%d listings, want at most 3 (the first, then one each time the remembered refusals ran out)", n)
	}
}
