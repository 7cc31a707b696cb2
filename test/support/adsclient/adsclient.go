// Package adsclient is an xDS client for tests: one aggregated (ADS, state of the world)
// stream subscribed to the ClusterLoadAssignments of some resource names, acknowledging
// every response and keeping the last endpoints of each name, so that a test can compare
// what a connected client holds with the API server. It redials when its stream breaks (the
// operator killed and restarted), and forgets what it held then: after a reconnection it
// holds only what the new stream sent. Like grpc-go's client, it rejects (NACKs) a response
// with two endpoints at one address and keeps what it held.
package adsclient

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// Endpoint is one endpoint of a ClusterLoadAssignment.
type Endpoint struct {
	// Pod is the filter metadata registrar.dev/pod ("" when absent).
	Pod     string
	Address string
	Port    uint32
	// Health is the endpoint's health status name (HEALTHY, DRAINING, ...).
	Health string
}

// Client is one ADS stream's view.
type Client struct {
	node  string
	names []string

	mu         sync.Mutex
	state      map[string][]Endpoint // resource name → its endpoints, as last received
	connected  bool                  // a stream is open and answered at least once
	reconnects int
	lastErr    error
	version    string // the last accepted version
	nacks      int    // responses rejected, as grpc-go would
	lastNack   error
}

// Start dials addr (plaintext) and keeps an ADS stream subscribed to the EDS resources names
// until ctx is done. It returns at once; Snapshot tells what the client holds.
func Start(ctx context.Context, addr, node string, names []string) (*Client, error) {
	// gRPC's default reconnect backoff grows to 120 s: a client redials a restarted server
	// within 2 s here, so that a test measures the server, not the backoff.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 2 * time.Second,
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second}}))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c := &Client{node: node, names: names, state: map[string][]Endpoint{}}
	go func() {
		defer cc.Close()
		for ctx.Err() == nil {
			err := c.stream(ctx, cc)
			c.mu.Lock()
			c.connected, c.lastErr, c.state, c.version = false, err, map[string][]Endpoint{}, ""
			c.reconnects++
			c.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // redial pacing after a broken stream
			}
		}
	}()
	return c, nil
}

// stream runs one ADS stream until it breaks.
func (c *Client) stream(ctx context.Context, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return fmt.Errorf("open ADS stream: %w", err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: c.node}, TypeUrl: resourcev3.EndpointType, ResourceNames: c.names}); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		got := make(map[string][]Endpoint, len(resp.GetResources()))
		var reject error
		for _, r := range resp.GetResources() {
			var cla endpointv3.ClusterLoadAssignment
			if err := r.UnmarshalTo(&cla); err != nil {
				return fmt.Errorf("decode ClusterLoadAssignment: %w", err)
			}
			eps := endpointsOf(&cla)
			if err := duplicate(eps); err != nil && reject == nil {
				reject = fmt.Errorf("%s: %w", cla.GetClusterName(), err)
			}
			got[cla.GetClusterName()] = eps
		}
		ack := &discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: c.names,
			VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
		c.mu.Lock()
		if reject != nil {
			// As grpc-go does: the whole response is rejected, the previous state kept.
			c.nacks++
			c.lastNack = reject
			ack.VersionInfo = c.version
			ack.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: reject.Error()}
		} else {
			maps.Copy(c.state, got)
			c.version = resp.GetVersionInfo()
		}
		c.connected = true
		c.mu.Unlock()
		if err := st.Send(ack); err != nil {
			return fmt.Errorf("acknowledge: %w", err)
		}
	}
}

// duplicate is grpc-go's check of a ClusterLoadAssignment: one address must not appear
// twice ("duplicate endpoint with the same address"), whatever the endpoints' health.
func duplicate(eps []Endpoint) error {
	seen := make(map[string]string, len(eps))
	for _, ep := range eps {
		addr := fmt.Sprintf("%s:%d", ep.Address, ep.Port)
		if prev, ok := seen[addr]; ok {
			return fmt.Errorf("duplicate endpoint with the same address %s (pods %q and %q)", addr, prev, ep.Pod)
		}
		seen[addr] = ep.Pod
	}
	return nil
}

func endpointsOf(cla *endpointv3.ClusterLoadAssignment) []Endpoint {
	var out []Endpoint
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			ep := Endpoint{Health: lb.GetHealthStatus().String()}
			if sa := lb.GetEndpoint().GetAddress().GetSocketAddress(); sa != nil {
				ep.Address, ep.Port = sa.GetAddress(), sa.GetPortValue()
			}
			if md := lb.GetMetadata().GetFilterMetadata()["registrar.dev"]; md != nil {
				ep.Pod = md.GetFields()["pod"].GetStringValue()
			}
			out = append(out, ep)
		}
	}
	return out
}

// Snapshot is what the client holds: each name's endpoints (a name the stream never sent
// is absent), whether a stream is open and answered, how often it was redialled, and how
// many responses it rejected (NACKed) as grpc-go's client would.
type Snapshot struct {
	Node       string
	Connected  bool
	Reconnects int
	LastErr    error
	Nacks      int
	LastNack   error
	State      map[string][]Endpoint
}

// Snapshot copies the client's view.
func (c *Client) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Snapshot{Node: c.node, Connected: c.connected, Reconnects: c.reconnects, LastErr: c.lastErr, Nacks: c.nacks,
		LastNack: c.lastNack, State: maps.Clone(c.state)}
}
