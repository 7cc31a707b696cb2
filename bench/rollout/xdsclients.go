package main

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/registrar-dev/registrar/internal/xds"
)

// assignment is what a client reads from one ClusterLoadAssignment: the pods published
// HEALTHY, sorted, and how many endpoints it has (HEALTHY and DRAINING).
type assignment struct {
	healthy   []string
	endpoints int
}

// decoded shares the decoding of a ClusterLoadAssignment between the clients: every client
// receives the same bytes of a version (the server marshals each version once), and decoding
// 2,000 endpoints 100 times per push would make this process, not the server, the limit of
// the run. Each client still receives every byte over its own stream and diffs what it holds.
type decoded struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[uint64]*decodeEntry
	ring []uint64 // insertion order, for eviction
}

type decodeEntry struct {
	once sync.Once
	a    assignment
	err  error
}

const decodedKept = 64

func newDecoded() *decoded { return &decoded{seed: maphash.MakeSeed(), m: map[uint64]*decodeEntry{}} }

func (d *decoded) get(a *anypb.Any) (assignment, error) {
	h := maphash.Bytes(d.seed, a.GetValue())
	d.mu.Lock()
	e := d.m[h]
	if e == nil {
		e = &decodeEntry{}
		d.m[h] = e
		d.ring = append(d.ring, h)
		if len(d.ring) > decodedKept {
			delete(d.m, d.ring[0])
			d.ring = d.ring[1:]
		}
	}
	d.mu.Unlock()
	e.once.Do(func() { e.a, e.err = decodeCLA(a) })
	return e.a, e.err
}

func decodeCLA(a *anypb.Any) (assignment, error) {
	var cla endpointv3.ClusterLoadAssignment
	if err := a.UnmarshalTo(&cla); err != nil {
		return assignment{}, fmt.Errorf("decode ClusterLoadAssignment: %w", err)
	}
	var out assignment
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			out.endpoints++
			if lb.GetHealthStatus() != corev3.HealthStatus_HEALTHY {
				continue
			}
			pod := lb.GetMetadata().GetFilterMetadata()[xds.MetadataNamespace].GetFields()["pod"].GetStringValue()
			out.healthy = append(out.healthy, pod)
		}
	}
	slices.Sort(out.healthy)
	return out, nil
}

// diffSorted calls added for each name of cur not in prev and removed for each of prev not
// in cur (both sorted).
func diffSorted(prev, cur []string, added, removed func(string)) {
	i, j := 0, 0
	for i < len(prev) || j < len(cur) {
		switch {
		case j == len(cur) || (i < len(prev) && prev[i] < cur[j]):
			removed(prev[i])
			i++
		case i == len(prev) || cur[j] < prev[i]:
			added(cur[j])
			j++
		default:
			i++
			j++
		}
	}
}

// xdsClient is one simulated proxyless gRPC client: one ADS stream (state of the world or
// delta) subscribed to the Listener, RouteConfiguration, Cluster and ClusterLoadAssignment of
// the service, acknowledging every response at once.
type xdsClient struct {
	id    int
	delta bool
	name  string // the resource name

	bytes    atomic.Int64 // every response's proto.Size
	edsBytes atomic.Int64 // EDS responses' proto.Size
	edsResps atomic.Int64
	lastEDS  atomic.Int64 // the last EDS response's proto.Size

	mu    sync.Mutex
	state assignment
	has   bool // received the assignment at least once
	err   error
}

func (c *xdsClient) group() group {
	if c.delta {
		return groupDelta
	}
	return groupSotw
}

func (c *xdsClient) snapshot() (assignment, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state, c.has, c.err
}

// received handles the assignment of one EDS response.
func (c *xdsClient) received(a assignment, t *tracker, at time.Time) {
	c.mu.Lock()
	prev := c.state.healthy
	c.state, c.has = a, true
	c.mu.Unlock()
	g := c.group()
	diffSorted(prev, a.healthy,
		func(p string) { t.observe(g, p, ready, at) },
		func(p string) { t.observe(g, p, terminating, at) })
}

// dialClient dials addr from a loopback source address of its own group (the server allows
// 64 streams per client address), one connection per client as separate processes have.
func dialClient(addr string, id int) (*grpc.ClientConn, error) {
	g := id / 32
	ip := net.IPv4(127, 3, byte(g/250), byte(g%250+1))
	return grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
			return d.DialContext(ctx, "tcp", a)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)),
	)
}

func (c *xdsClient) node() *corev3.Node {
	return &corev3.Node{Id: fmt.Sprintf("rollout-%d", c.id), Cluster: "rollout"}
}

// run keeps the client's stream until ctx ends; a stream that fails is the run's error.
func (c *xdsClient) run(ctx context.Context, conn *grpc.ClientConn, dec *decoded, t *tracker) {
	var err error
	if c.delta {
		err = c.runDelta(ctx, conn, dec, t)
	} else {
		err = c.runSotw(ctx, conn, dec, t)
	}
	if ctx.Err() == nil {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
	}
}

func (c *xdsClient) runSotw(ctx context.Context, conn *grpc.ClientConn, dec *decoded, t *tracker) error {
	str, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	names := []string{c.name}
	for i, typ := range xds.TypeURLs {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names}
		if i == 0 {
			req.Node = c.node()
		}
		if err := str.Send(req); err != nil {
			return err
		}
	}
	for {
		resp, err := str.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("server closed the stream")
			}
			return err
		}
		at := time.Now()
		n := int64(proto.Size(resp))
		c.bytes.Add(n)
		if resp.GetTypeUrl() == resourcev3.EndpointType {
			c.edsBytes.Add(n)
			c.edsResps.Add(1)
			c.lastEDS.Store(n)
			for _, r := range resp.GetResources() {
				a, err := dec.get(r)
				if err != nil {
					return err
				}
				c.received(a, t, at)
			}
		}
		if err := str.Send(&discoveryv3.DiscoveryRequest{
			TypeUrl: resp.GetTypeUrl(), VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(), ResourceNames: names,
		}); err != nil {
			return err
		}
	}
}

func (c *xdsClient) runDelta(ctx context.Context, conn *grpc.ClientConn, dec *decoded, t *tracker) error {
	str, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	for i, typ := range xds.TypeURLs {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: []string{c.name}}
		if i == 0 {
			req.Node = c.node()
		}
		if err := str.Send(req); err != nil {
			return err
		}
	}
	for {
		resp, err := str.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("server closed the stream")
			}
			return err
		}
		at := time.Now()
		n := int64(proto.Size(resp))
		c.bytes.Add(n)
		if resp.GetTypeUrl() == resourcev3.EndpointType {
			c.edsBytes.Add(n)
			c.edsResps.Add(1)
			c.lastEDS.Store(n)
			for _, r := range resp.GetResources() {
				a, err := dec.get(r.GetResource())
				if err != nil {
					return err
				}
				c.received(a, t, at)
			}
			if slices.Contains(resp.GetRemovedResources(), c.name) {
				c.received(assignment{}, t, at)
			}
		}
		if err := str.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}); err != nil {
			return err
		}
	}
}
