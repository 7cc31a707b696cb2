package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/xds"
	"github.com/registrar-dev/registrar/internal/xds/remote"
)

// xdsConfig is what the xDS flags set.
type xdsConfig struct {
	bindAddress  string
	certFile     string
	keyFile      string
	clientCAFile string
	// allowInsecure lets a plaintext server bind an address other than loopback.
	allowInsecure bool
	// maxStreamsPerPeer bounds the streams open from one client IP address.
	maxStreamsPerPeer int
	// gateAckTimeout, when positive, makes readiness gates wait for the xDS clients' ACKs.
	gateAckTimeout time.Duration
	// remoteLocalities serves other clusters' records of a shared store at priority 1.
	remoteLocalities bool
}

func bindXDSFlags(fs *flag.FlagSet, c *xdsConfig) {
	fs.StringVar(&c.bindAddress, "xds-bind-address", "", "Address the xDS (ADS) server for Envoy and proxyless gRPC clients listens on (e.g. :18000); empty disables it. Only the leader serves (docs/xds.md); refused with --sharding=lease, where no replica holds every registry.")
	fs.StringVar(&c.certFile, "xds-cert-file", "", "TLS certificate of the xDS server (re-read on every handshake); empty serves plaintext.")
	fs.StringVar(&c.keyFile, "xds-key-file", "", "TLS key of the xDS server.")
	fs.StringVar(&c.clientCAFile, "xds-client-ca-file", "", "CA bundle that xDS clients' certificates must chain to (mTLS); needs --xds-cert-file.")
	fs.BoolVar(&c.allowInsecure, "xds-allow-insecure", false, "Serve plaintext xDS on an address other than loopback (e.g. :18000 for clients in other pods). xDS has no authentication of its own: any client that reaches the port can read every served service's endpoints. Without it and without --xds-cert-file, --xds-bind-address must be a loopback address (docs/security.md).")
	fs.IntVar(&c.maxStreamsPerPeer, "xds-max-streams-per-peer", xds.DefaultMaxStreamsPerPeer, "ADS streams one client IP address may hold open at a time; the next is refused (RESOURCE_EXHAUSTED). Raise it for many clients behind one address (NAT, host network).")
	fs.BoolVar(&c.remoteLocalities, "xds-remote-localities", true, "With --store-shared and --xds-bind-address: also serve the other clusters' instances of each service from the shared store, at priority 1 (one locality per cluster and zone), so that gRPC clients fail over to them when this cluster has none; false serves this cluster's pods only (docs/xds.md).")
	fs.DurationVar(&c.gateAckTimeout, "xds-gate-ack-timeout", 0, "When positive, a new pod's readiness gate also waits until every connected xDS client subscribed to its registry has acknowledged the pod, for at most this long after it was pushed (a dead client cannot hold a gate longer); 0 does not wait (docs/xds.md).")
}

func (c xdsConfig) validate() error {
	if (c.certFile == "") != (c.keyFile == "") {
		return fmt.Errorf("--xds-cert-file and --xds-key-file go together")
	}
	if c.gateAckTimeout < 0 {
		return fmt.Errorf("--xds-gate-ack-timeout must not be negative")
	}
	if c.clientCAFile != "" && c.certFile == "" {
		return fmt.Errorf("--xds-client-ca-file needs --xds-cert-file and --xds-key-file")
	}
	if c.maxStreamsPerPeer < 1 {
		return fmt.Errorf("--xds-max-streams-per-peer must be at least 1")
	}
	if c.bindAddress != "" {
		return xds.CheckBind(c.bindAddress, c.certFile != "", c.allowInsecure)
	}
	return nil
}

// setupXDS adds the xDS server to the manager (it runs on the leader only) and returns it
// as the reconciler's Publisher; nil when --xds-bind-address is empty. With
// --xds-remote-localities in a shared store it also adds the read-only follower of the other
// clusters' records, which feeds the server (both leader only, stopped with the manager).
func setupXDS(mgr ctrl.Manager, cfg config, cli remote.Store) (*xds.Server, error) {
	c := cfg.xds
	if c.bindAddress == "" {
		return nil, nil
	}
	var follower *remote.Follower
	var synced <-chan struct{}
	if followsRemote(c, cfg.multicluster.shared) {
		follower = remote.New(remote.Config{
			Store: cli, Prefix: cfg.storePrefix, Cluster: cfg.multicluster.id,
			Log: ctrl.Log.WithName("xds-remote"),
		})
		synced = follower.Synced()
	}
	srv := xds.New(xds.Config{
		BindAddress: c.bindAddress, CertFile: c.certFile, KeyFile: c.keyFile, ClientCAFile: c.clientCAFile,
		AllowInsecure: c.allowInsecure, MaxStreamsPerPeer: c.maxStreamsPerPeer,
		Expected: func(ctx context.Context) ([]types.NamespacedName, error) {
			var list v1beta1.ServiceRegistryList
			if err := mgr.GetClient().List(ctx, &list); err != nil {
				return nil, err
			}
			keys := make([]types.NamespacedName, len(list.Items))
			for i := range list.Items {
				keys[i] = types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}
			}
			return keys, nil
		},
		RemoteSynced: synced,
		Log:          ctrl.Log.WithName("xds"),
	})
	if err := mgr.Add(srv); err != nil {
		return nil, fmt.Errorf("add xDS server: %w", err)
	}
	if follower != nil {
		follower.SetSink(srv)
		if err := mgr.Add(follower); err != nil {
			return nil, fmt.Errorf("add the xDS follower of other clusters' records: %w", err)
		}
		setupLog.Info("xDS serves other clusters' instances at priority 1", "prefix", cfg.storePrefix, "cluster", cfg.multicluster.id)
	}
	return srv, nil
}

// followsRemote reports whether the xDS server serves other clusters' records: it is on,
// the store is shared and --xds-remote-localities is not false.
func followsRemote(x xdsConfig, shared bool) bool {
	return x.bindAddress != "" && shared && x.remoteLocalities
}
