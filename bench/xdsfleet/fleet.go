package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/registrar-dev/registrar/internal/xds"
)

// client is one simulated ADS client: a proxyless gRPC client or an Envoy asking for the
// Listener, RouteConfiguration, Cluster and ClusterLoadAssignment of each service it calls,
// on one ADS stream, state of the world or delta, ACKing every response.
type client struct {
	id    int
	delta bool
	subs  []int // service indexes
}

// planClients: the first everything clients subscribe to every service, the others to
// perClient services drawn at random; deltaShare of them speak delta xDS.
func planClients(rng *rand.Rand, clients, everything, perClient, services int, deltaShare float64) []client {
	out := make([]client, clients)
	for c := range out {
		cl := client{id: c, delta: rng.Float64() < deltaShare}
		if c < everything {
			cl.subs = make([]int, services)
			for i := range cl.subs {
				cl.subs[i] = i
			}
		} else {
			cl.subs = rng.Perm(services)[:min(perClient, services)]
			sort.Ints(cl.subs)
		}
		out[c] = cl
	}
	return out
}

// change is one endpoint change as the driver follows it.
type change struct {
	k, svc  int
	issued  time.Time // the driver wrote it to the server
	applied time.Time // the server's publish returned (its own clock: same machine)
	done    time.Time // the last subscribed client ACKed a response holding it
	pending int       // subscribed clients that have not ACKed it yet
}

// tracker follows what every client has acknowledged.
type tracker struct {
	mu      sync.Mutex
	subs    []int           // subscribers per service
	seen    []map[int]int32 // per client: service → latest change ACKed (-1: base); present once received
	want    []int           // per client: services subscribed
	synced  int             // clients holding all their services
	syncCh  chan struct{}   // closed when synced reaches len(want)
	changes map[int]*change // by number
	open    [][]*change     // per service: changes not yet done, ascending
	last    []int           // per service: its latest change (-1: none)
	doneCh  chan struct{}   // signalled when a change is done
	errs    map[string]int  // stream errors by gRPC code
	sample  string          // one error message
	bytes   atomic.Int64    // response bytes received by every client
	resps   atomic.Int64    // responses received
	stopped atomic.Bool     // the run is over: stream errors no longer count
	heapc   chan struct{}   // closed when the server wrote its heap profile
}

func newTracker(clients []client, services int) *tracker {
	t := &tracker{
		subs: make([]int, services), seen: make([]map[int]int32, len(clients)), want: make([]int, len(clients)),
		syncCh: make(chan struct{}), changes: map[int]*change{}, open: make([][]*change, services),
		last: make([]int, services), doneCh: make(chan struct{}, 1), errs: map[string]int{},
	}
	for i := range t.last {
		t.last[i] = -1
	}
	for _, c := range clients {
		t.want[c.id] = len(c.subs)
		t.seen[c.id] = make(map[int]int32, len(c.subs))
		for _, s := range c.subs {
			t.subs[s]++
		}
	}
	if len(clients) == 0 {
		close(t.syncCh)
	}
	return t
}

// issue registers change k of service svc before the server is told of it.
func (t *tracker) issue(k, svc int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := &change{k: k, svc: svc, issued: at, pending: t.subs[svc]}
	t.changes[k] = ch
	t.last[svc] = k
	if ch.pending > 0 {
		t.open[svc] = append(t.open[svc], ch)
	}
}

func (t *tracker) applied(k int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ch := t.changes[k]; ch != nil {
		ch.applied = at
	}
}

// saw records that client c ACKed a response holding service svc at change k.
func (t *tracker) saw(c int, svc int, k int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, ok := t.seen[c][svc]
	if !ok {
		prev = -1
		t.seen[c][svc] = int32(k)
		if len(t.seen[c]) == t.want[c] {
			t.synced++
			if t.synced == len(t.want) {
				close(t.syncCh)
			}
		}
	} else if int32(k) <= prev {
		return
	}
	t.seen[c][svc] = int32(k)
	open := t.open[svc]
	// The open changes after prev up to k: one fewer client waits for each.
	i := sort.Search(len(open), func(i int) bool { return open[i].k > int(prev) })
	finished := false
	for ; i < len(open) && open[i].k <= k; i++ {
		open[i].pending--
		if open[i].pending == 0 {
			open[i].done = at
			finished = true
		}
	}
	if finished {
		kept := open[:0]
		for _, ch := range open {
			if ch.pending > 0 {
				kept = append(kept, ch)
			}
		}
		t.open[svc] = kept
		select {
		case t.doneCh <- struct{}{}:
		default:
		}
	}
}

// outstanding is how many changes still wait for a client.
func (t *tracker) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, o := range t.open {
		n += len(o)
	}
	return n
}

// behind counts the clients that do not hold the latest change of every service they
// subscribed to.
func (t *tracker) behind() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for c, seen := range t.seen {
		if len(seen) < t.want[c] {
			n++
			continue
		}
		for svc, k := range seen {
			if t.last[svc] > int(k) {
				n++
				break
			}
		}
	}
	return n
}

func (t *tracker) streamError(err error) {
	if t.stopped.Load() || err == nil || errors.Is(err, context.Canceled) {
		return
	}
	code := status.Code(err)
	if code == codes.Canceled {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs[code.String()]++
	if t.sample == "" {
		t.sample = err.Error()
	}
}

// fleet is the client side of one run: connections of 16 streams each (the most registrar's
// server allows on one connection), four connections per loopback address (64 streams, the
// most it allows per client address), as a fleet of sidecars on many hosts would arrive.
type fleet struct {
	conns []*grpc.ClientConn
	wg    sync.WaitGroup
}

const streamsPerConn = 16
const connsPerAddr = 4

func dialFleet(addr string, clients int) (*fleet, error) {
	f := &fleet{}
	n := (clients + streamsPerConn - 1) / streamsPerConn
	for i := range n {
		g := i / connsPerAddr
		ip := net.IPv4(127, 1, byte(g/250), byte(g%250+1))
		conn, err := grpc.NewClient("passthrough:///"+addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
				return d.DialContext(ctx, "tcp", a)
			}),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)),
		)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("dial %s from %s: %w", addr, ip, err)
		}
		f.conns = append(f.conns, conn)
	}
	return f, nil
}

func (f *fleet) close() {
	for _, c := range f.conns {
		_ = c.Close()
	}
}

// start runs every client's stream until ctx ends.
func (f *fleet) start(ctx context.Context, w *world, clients []client, t *tracker) {
	for _, cl := range clients {
		conn := f.conns[cl.id/streamsPerConn]
		names := make([]string, len(cl.subs))
		for i, s := range cl.subs {
			names[i] = w.resource(s)
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			var err error
			if cl.delta {
				err = runDelta(ctx, conn, cl, names, t)
			} else {
				err = runSotw(ctx, conn, cl, names, t)
			}
			t.streamError(err)
		}()
	}
}

// seenIn reports, for each ClusterLoadAssignment of a response, its service and latest change.
type seenCLA struct{ svc, k int }

// claCache remembers what a client decoded, by the resource's bytes: a state-of-the-world
// server may resend assignments the client holds, and decoding them again would make the
// client process, not the server, the bench's limit.
type claCache struct {
	max  int
	seen map[string]seenCLA
}

func newCLACache(subs int) *claCache {
	return &claCache{max: 2*subs + 16, seen: make(map[string]seenCLA, subs)}
}

func (c *claCache) read(a *anypb.Any, out []seenCLA) ([]seenCLA, error) {
	if s, ok := c.seen[string(a.GetValue())]; ok {
		return append(out, s), nil
	}
	n := len(out)
	out, err := readCLA(a, out)
	if err != nil || len(out) == n {
		return out, err
	}
	if len(c.seen) >= c.max {
		clear(c.seen)
	}
	c.seen[string(a.GetValue())] = out[n]
	return out, nil
}

func readCLA(a *anypb.Any, out []seenCLA) ([]seenCLA, error) {
	var cla endpointv3.ClusterLoadAssignment
	if err := a.UnmarshalTo(&cla); err != nil {
		return out, fmt.Errorf("decode ClusterLoadAssignment: %w", err)
	}
	svc := serviceOf(cla.GetClusterName())
	if svc < 0 {
		return out, nil
	}
	k := -1
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			k = max(k, changeOf(lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()))
		}
	}
	return append(out, seenCLA{svc: svc, k: k}), nil
}

func node(cl client) *corev3.Node {
	return &corev3.Node{Id: fmt.Sprintf("fleet-%d", cl.id), Cluster: "xdsfleet"}
}

func runSotw(ctx context.Context, conn *grpc.ClientConn, cl client, names []string, t *tracker) error {
	str, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	for i, typ := range xds.TypeURLs {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names}
		if i == 0 {
			req.Node = node(cl)
		}
		if err := str.Send(req); err != nil {
			return err
		}
	}
	var found []seenCLA
	cache := newCLACache(len(names))
	for {
		resp, err := str.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("server closed the stream")
			}
			return err
		}
		t.bytes.Add(int64(proto.Size(resp)))
		t.resps.Add(1)
		found = found[:0]
		if resp.GetTypeUrl() == resourcev3.EndpointType {
			for _, a := range resp.GetResources() {
				if found, err = cache.read(a, found); err != nil {
					return err
				}
			}
		}
		if err := str.Send(&discoveryv3.DiscoveryRequest{
			TypeUrl: resp.GetTypeUrl(), VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(), ResourceNames: names,
		}); err != nil {
			return err
		}
		now := time.Now()
		for _, s := range found {
			t.saw(cl.id, s.svc, s.k, now)
		}
	}
}

func runDelta(ctx context.Context, conn *grpc.ClientConn, cl client, names []string, t *tracker) error {
	str, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	for i, typ := range xds.TypeURLs {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: names}
		if i == 0 {
			req.Node = node(cl)
		}
		if err := str.Send(req); err != nil {
			return err
		}
	}
	var found []seenCLA
	cache := newCLACache(len(names))
	for {
		resp, err := str.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("server closed the stream")
			}
			return err
		}
		t.bytes.Add(int64(proto.Size(resp)))
		t.resps.Add(1)
		found = found[:0]
		if resp.GetTypeUrl() == resourcev3.EndpointType {
			for _, r := range resp.GetResources() {
				if found, err = cache.read(r.GetResource(), found); err != nil {
					return err
				}
			}
		}
		if err := str.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}); err != nil {
			return err
		}
		now := time.Now()
		for _, s := range found {
			t.saw(cl.id, s.svc, s.k, now)
		}
	}
}

func (t *tracker) onHeap(c chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.heapc = c
}

func (t *tracker) heapWritten() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.heapc != nil {
		close(t.heapc)
		t.heapc = nil
	}
}

// waitDone waits until every change reached every subscribed client, or for at most drain.
func (t *tracker) waitDone(drain time.Duration) {
	deadline := time.After(drain)
	for t.outstanding() > 0 {
		select {
		case <-t.doneCh:
		case <-deadline:
			return
		}
	}
}
