package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/internal/xds"
)

// xdsConfig is what the xDS flags set.
type xdsConfig struct {
	bindAddress  string
	certFile     string
	keyFile      string
	clientCAFile string
	// gateAckTimeout, when positive, makes readiness gates wait for the xDS clients' ACKs.
	gateAckTimeout time.Duration
}

func bindXDSFlags(fs *flag.FlagSet, c *xdsConfig) {
	fs.StringVar(&c.bindAddress, "xds-bind-address", "", "Address the xDS (ADS) server for Envoy and proxyless gRPC clients listens on (e.g. :18000); empty disables it. Only the leader serves (docs/xds.md).")
	fs.StringVar(&c.certFile, "xds-cert-file", "", "TLS certificate of the xDS server (re-read on every handshake); empty serves plaintext.")
	fs.StringVar(&c.keyFile, "xds-key-file", "", "TLS key of the xDS server.")
	fs.StringVar(&c.clientCAFile, "xds-client-ca-file", "", "CA bundle that xDS clients' certificates must chain to (mTLS); needs --xds-cert-file.")
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
	return nil
}

// setupXDS adds the xDS server to the manager (it runs on the leader only) and returns it
// as the reconciler's Publisher; nil when --xds-bind-address is empty.
func setupXDS(mgr ctrl.Manager, c xdsConfig) (*xds.Server, error) {
	if c.bindAddress == "" {
		return nil, nil
	}
	srv := xds.New(xds.Config{
		BindAddress: c.bindAddress, CertFile: c.certFile, KeyFile: c.keyFile, ClientCAFile: c.clientCAFile,
		Expected: func(ctx context.Context) ([]types.NamespacedName, error) {
			var list v1alpha1.ServiceRegistryList
			if err := mgr.GetClient().List(ctx, &list); err != nil {
				return nil, err
			}
			keys := make([]types.NamespacedName, len(list.Items))
			for i := range list.Items {
				keys[i] = types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}
			}
			return keys, nil
		},
		Log: ctrl.Log.WithName("xds"),
	})
	if err := mgr.Add(srv); err != nil {
		return nil, fmt.Errorf("add xDS server: %w", err)
	}
	return srv, nil
}
