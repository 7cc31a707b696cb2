package clients

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// PeerStreams counts the streams open per client IP address and refuses one beyond max:
// one client cannot hold more than max streams' state (subscriptions, pending responses)
// however many connections it opens. Its map holds the addresses with an open stream only.
type PeerStreams struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

// NewPeerStreams refuses a stream beyond maxStreams open from one client IP address.
func NewPeerStreams(maxStreams int) *PeerStreams {
	return &PeerStreams{max: maxStreams, open: map[string]int{}}
}

// Intercept is the server's stream interceptor.
func (p *PeerStreams) Intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	host := peerHost(ss.Context())
	if !p.acquire(host) {
		streamsRefused.Inc()
		return status.Errorf(codes.ResourceExhausted, "more than %d xDS streams open from %s", p.max, host)
	}
	defer p.release(host)
	return handler(srv, ss)
}

func (p *PeerStreams) acquire(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[host] >= p.max {
		return false
	}
	p.open[host]++
	return true
}

func (p *PeerStreams) release(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[host] <= 1 {
		delete(p.open, host)
		return
	}
	p.open[host]--
}

// peerHost is the IP address of the stream's client (its whole address when it has no
// port; "" when unknown).
func peerHost(ctx context.Context) string {
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.Addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(pr.Addr.String())
	if err != nil {
		return pr.Addr.String()
	}
	return host
}
