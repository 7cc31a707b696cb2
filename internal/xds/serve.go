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
)

// Config configures the server.
type Config struct {
	// BindAddress is where the ADS server listens (host:port).
	BindAddress string
	// CertFile and KeyFile are the server's TLS certificate; empty serves plaintext.
	CertFile, KeyFile string
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
	Log          logr.Logger
	// OnAck, when set, is called for every resource of every acknowledged or rejected
	// response (tests and benchmarks). It must not block.
	OnAck func(Ack)
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
	// go-control-plane's server, with the same ACK accounting (delta.go).
	cb := serverv3.CallbackFuncs{
		DeltaStreamOpenFunc:     s.acks.open,
		DeltaStreamClosedFunc:   s.acks.closed,
		StreamDeltaRequestFunc:  s.acks.deltaRequest,
		StreamDeltaResponseFunc: s.acks.deltaResponse,
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
	opts := make([]grpc.ServerOption, 0, 4)
	opts = append(opts,
		// Find dead clients; let clients ping no more often than every 10 s.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxConcurrentStreams(16),
		// Protobuf, with the resource names of repeated requests shared (codec.go).
		grpc.ForceServerCodecV2(newRequestCodec()),
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
