// Package etcdclient is how registrar reaches etcd: the client every store, the self-
// monitoring and the Eureka API share (TLS from files, client certificates, keep-alives,
// and a reconnect backoff capped at MaxReconnectDelay so that a store that comes back is
// dialled again within seconds), and the in-process etcd server cmd runs when no store
// endpoints are given (loopback only). It knows nothing of registrar's keys: the store
// backend (internal/store/etcd) and its fences build on the client it returns.
package etcdclient

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// MaxReconnectDelay caps the client's delay between attempts to reconnect to the store.
const MaxReconnectDelay = 2 * time.Second

// Config says how to reach an etcd cluster.
type Config struct {
	Endpoints   []string
	DialTimeout time.Duration
	// CAFile, CertFile and KeyFile enable TLS (client certificates when CertFile is set).
	CAFile, CertFile, KeyFile string
	Username, Password        string
}

// New connects to etcd. It does not wait for the cluster to be reachable: a store that
// is down at start is reported by the first call, and the client keeps reconnecting.
func New(cfg Config) (*clientv3.Client, error) {
	var tlsCfg *tls.Config
	if cfg.CAFile != "" || cfg.CertFile != "" {
		info := transport.TLSInfo{TrustedCAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("store TLS config: %w", err)
		}
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		TLS:                  tlsCfg,
		Username:             cfg.Username,
		Password:             cfg.Password,
		Logger:               zap.NewNop(),
		// gRPC's default reconnect backoff grows to 120 s: after a 30 s outage the client
		// would wait many seconds more before it dials the returned store. Cap it.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: MaxReconnectDelay},
			MinConnectTimeout: 2 * time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to store %v: %w", cfg.Endpoints, err)
	}
	return cli, nil
}

// EmbeddedConfig configures the in-process etcd server used when no store endpoints are given.
type EmbeddedConfig struct {
	// DataDir holds the server's data; it survives restarts.
	DataDir string
	// ClientURL and PeerURL are where the server listens, e.g. http://127.0.0.1:2379.
	ClientURL, PeerURL string
	// StartTimeout bounds how long Start waits for the server to be ready.
	StartTimeout time.Duration
}

// Embedded is a running in-process etcd server.
type Embedded struct {
	server *embed.Etcd
}

// StartEmbedded starts an etcd server in this process and waits until it serves.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	clientURL, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("embedded store client URL %q: %w", cfg.ClientURL, err)
	}
	peerURL, err := url.Parse(cfg.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("embedded store peer URL %q: %w", cfg.PeerURL, err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded store data dir: %w", err)
	}
	ec := embed.NewConfig()
	ec.Name = "registrar"
	ec.Dir = filepath.Clean(cfg.DataDir)
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*clientURL}, []url.URL{*clientURL}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*peerURL}, []url.URL{*peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.LogLevel = "error"
	srv, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded store in %s: %w", cfg.DataDir, err)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = time.Minute
	}
	select {
	case <-srv.Server.ReadyNotify():
		return &Embedded{server: srv}, nil
	case err := <-srv.Err():
		srv.Close()
		return nil, fmt.Errorf("embedded store: %w", err)
	case <-time.After(cfg.StartTimeout):
		srv.Close()
		return nil, fmt.Errorf("embedded store not ready after %s", cfg.StartTimeout)
	}
}

// Endpoints are the client URLs of the embedded server.
func (e *Embedded) Endpoints() []string {
	urls := make([]string, 0, len(e.server.Clients))
	for _, l := range e.server.Clients {
		urls = append(urls, "http://"+l.Addr().String())
	}
	return urls
}

// Run blocks until ctx is done, then stops the server.
func (e *Embedded) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case err := <-e.server.Err():
		e.server.Close()
		return fmt.Errorf("embedded store: %w", err)
	}
	e.server.Close()
	return nil
}
