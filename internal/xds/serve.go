package xds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	ktypes "k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/xds/clients"
	"github.com/registrar-dev/registrar/internal/xds/resource"
)

// Config configures the server.
type Config struct {
	// BindAddress is where the ADS server listens (host:port).
	BindAddress string
	// CertFile and KeyFile are the server's TLS certificate; empty serves plaintext, which
	// Start refuses on an address other than loopback unless AllowInsecure (CheckBind).
	CertFile, KeyFile string
	// AllowInsecure lets a plaintext server listen on any address (--xds-allow-insecure):
	// xDS has no other authentication, so any client that reaches the port can subscribe.
	AllowInsecure bool
	// ClientCAFile, when set (with a certificate), requires clients to present a certificate
	// signed by one of its CAs (mTLS).
	ClientCAFile string
	// Expected lists the ServiceRegistries that exist when the server starts; it listens once
	// each of them was published (or unpublished), or after WarmTimeout (default 30 s).
	Expected    func(context.Context) ([]ktypes.NamespacedName, error)
	WarmTimeout time.Duration
	// RemoteSynced, when set, is closed once the other clusters' records were listed
	// (remote.Follower.Synced): the server also waits for it before it listens, within the
	// same WarmTimeout, so that a new leader never serves a priority 0 without its priority 1.
	RemoteSynced <-chan struct{}
	// RequestRate and RequestBurst limit the requests of one stream (default 50/s, 100):
	// a client beyond them has its stream closed.
	RequestRate  float64
	RequestBurst int
	// MaxStreamsPerPeer bounds the ADS streams open at a time from one client IP address
	// (default 64); the next is refused with RESOURCE_EXHAUSTED.
	MaxStreamsPerPeer int
	Log               logr.Logger
	// OnAck, when set, is called for every resource of every acknowledged or rejected
	// response (tests and benchmarks). It must not block.
	OnAck func(clients.Ack)
	// OnPublished, when set, is called for every ClusterLoadAssignment entering the cache,
	// under the publish lock. It must not block.
	OnPublished func(Published)
}

func (c Config) requestRate() float64 {
	if c.RequestRate > 0 {
		return c.RequestRate
	}
	return 50
}

func (c Config) maxStreamsPerPeer() int {
	if c.MaxStreamsPerPeer > 0 {
		return c.MaxStreamsPerPeer
	}
	return DefaultMaxStreamsPerPeer
}

// DefaultMaxStreamsPerPeer is Config.MaxStreamsPerPeer's default.
const DefaultMaxStreamsPerPeer = 64

// MaxRequestBytes bounds an xDS request (gRPC's limit is 4 MiB): a request names the
// resources its client subscribes to (about 25 bytes each) and, first on a stream, the node
// (Envoy's, with its extensions, is tens of KiB). A bigger request closes its stream with
// RESOURCE_EXHAUSTED.
const MaxRequestBytes = 256 << 10

// CheckBind reports why the server must not listen on bindAddress: plaintext (tls false)
// on an address other than loopback, unless allowInsecure. xDS has no authentication of
// its own, so a plaintext port that other hosts reach lets any of them subscribe to every
// service's endpoints and hold streams open.
func CheckBind(bindAddress string, tls, allowInsecure bool) error {
	if tls || allowInsecure || loopback(bindAddress) {
		return nil
	}
	return fmt.Errorf("xDS server: %q is not a loopback address and the server has no TLS: any client that reaches it could subscribe "+
		"(xDS has no authentication of its own); serve TLS (--xds-cert-file and --xds-key-file, with --xds-client-ca-file for mTLS), "+
		"bind 127.0.0.1, or pass --xds-allow-insecure to serve plaintext on it anyway", bindAddress)
}

// loopback tells whether host:port names a loopback address ("localhost" or a loopback IP;
// an empty host is every interface).
func loopback(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c Config) requestBurst() int {
	if c.RequestBurst > 0 {
		return c.RequestBurst
	}
	return 100
}

// NeedLeaderElection: only the leader serves xDS. Its reconcilers are the only ones that
// decide, so a replica that is not the leader has nothing current to serve; it does not
// listen, and clients (dialing a Service in front of the replicas) reconnect until they reach
// the leader.
func (s *Server) NeedLeaderElection() bool { return true }

// Start waits until every existing ServiceRegistry was published (or WarmTimeout), then
// serves ADS on BindAddress until ctx ends, when it closes every stream.
func (s *Server) Start(ctx context.Context) error {
	opts, err := s.serverOptions()
	if err != nil {
		return err
	}
	s.waitWarm(ctx)
	s.mu.Lock()
	s.seen = nil // warm: markSeen keeps nothing more
	s.mu.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", s.cfg.BindAddress)
	if err != nil {
		return fmt.Errorf("xDS server: listen on %s: %w", s.cfg.BindAddress, err)
	}
	gs := grpc.NewServer(opts...)
	mux := &cache.MuxCache{
		Classify:      func(r *cache.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cache.DeltaRequest) string { return r.GetTypeUrl() },
		Caches:        map[string]cache.Cache{},
	}
	for t, c := range s.caches {
		mux.Caches[t] = c
	}
	// State-of-the-world streams are served by adsServer (sotw.go), delta streams by
	// go-control-plane's server, with the same ACK accounting (internal/xds/clients, delta.go).
	cb := serverv3.CallbackFuncs{
		DeltaStreamOpenFunc:     s.acks.Open,
		DeltaStreamClosedFunc:   s.acks.Closed,
		StreamDeltaRequestFunc:  s.acks.DeltaRequest,
		StreamDeltaResponseFunc: s.acks.DeltaResponse,
	}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, &adsServer{Server: serverv3.NewServer(ctx, mux, cb), s: s, ctx: ctx})
	s.addr = lis.Addr().String()
	close(s.listening)
	s.log.Info("serving xDS (ADS)", "address", s.addr, "tls", s.cfg.CertFile != "", "mTLS", s.cfg.ClientCAFile != "", "versionPrefix", s.prefix)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		gs.Stop() // ADS streams never end on their own: close them
	}()
	err = gs.Serve(lis)
	<-stopped
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("xDS server: %w", err)
	}
	return nil
}

// Listening is closed once the server listens; Addr is then its address.
func (s *Server) Listening() <-chan struct{} { return s.listening }

// Addr is the address the server listens on (after Listening is closed).
func (s *Server) Addr() string { return s.addr }

func (s *Server) serverOptions() ([]grpc.ServerOption, error) {
	withTLS := s.cfg.CertFile != "" || s.cfg.KeyFile != ""
	if err := CheckBind(s.cfg.BindAddress, withTLS, s.cfg.AllowInsecure); err != nil {
		return nil, err
	}
	opts := make([]grpc.ServerOption, 0, 7)
	opts = append(opts,
		// Find dead clients; let clients ping no more often than every 10 s.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxConcurrentStreams(16),
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.ChainStreamInterceptor(clients.NewPeerStreams(s.cfg.maxStreamsPerPeer()).Intercept),
		// Protobuf, with the resource names of repeated requests shared (resource/codec.go).
		grpc.ForceServerCodecV2(resource.NewRequestCodec()),
	)
	if s.cfg.CertFile == "" && s.cfg.KeyFile == "" {
		if s.cfg.ClientCAFile != "" {
			return nil, errors.New("xDS server: a client CA needs a server certificate and key")
		}
		return opts, nil
	}
	if s.cfg.CertFile == "" || s.cfg.KeyFile == "" {
		return nil, errors.New("xDS server: certificate and key go together")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	// Read the files on every handshake, so a renewed certificate is served without a restart.
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load xDS server certificate: %w", err)
		}
		return &c, nil
	}
	if _, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile); err != nil {
		return nil, fmt.Errorf("xDS server: load certificate: %w", err)
	}
	if s.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(s.cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("xDS server: read client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("xDS server: no certificate in %s", s.cfg.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return append(opts, grpc.Creds(credentials.NewTLS(cfg))), nil
}
