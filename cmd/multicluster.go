package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// The kube-system namespace UID is the derived, stable identity of a cluster.
// +kubebuilder:rbac:groups="",resources=namespaces,resourceNames=kube-system,verbs=get

// clusterConfig is how this installation shares the store with other clusters
// (docs/multicluster.md).
type clusterConfig struct {
	clusterID string
	shared    bool
	// resolved at start: the cluster ID written into every value (and, when shared, every
	// key), and this installation's identity in its cluster's fence.
	id, installation string
}

func bindClusterFlags(fs *flag.FlagSet, c *clusterConfig) {
	fs.StringVar(&c.clusterID, "cluster-id", "", "This cluster's identity in the store: written into every endpoint's cluster field and, with --store-shared, into its key and its cluster's write fence and lease. A DNS-1123 label. Default: --cluster-name, else the kube-system namespace UID (stable for the cluster's life); required with --store-shared.")
	fs.BoolVar(&c.shared, "store-shared", false, "Several clusters publish into this --store-prefix: keys become {prefix}/{service}/{namespace}/{cluster-id}.{pod}, each cluster has its own write fence (refusing another installation with the same --cluster-id) and its own endpoint lease, and an installation only ever touches its own cluster's records. Needs --cluster-id and --store-lease-ttl, and --stores=etcd.")
}

// validate checks the flags that need no cluster.
func (c clusterConfig) validate(stores []string, leaseTTL time.Duration) error {
	if c.clusterID != "" && c.shared {
		if err := wire.ValidateClusterID(c.clusterID); err != nil {
			return fmt.Errorf("--cluster-id: %w", err)
		}
	}
	if !c.shared {
		return nil
	}
	switch {
	case c.clusterID == "":
		return errors.New("--store-shared needs an explicit --cluster-id, distinct for each cluster " +
			"(e.g. the kube-system namespace UID: kubectl get ns kube-system -o jsonpath='{.metadata.uid}')")
	case leaseTTL <= 0:
		return errors.New("--store-shared needs --store-lease-ttl (e.g. 60s): a cluster that disappears must age out " +
			"of the shared store, since no other cluster ever deletes its records")
	case !slices.Equal(stores, []string{storeEtcd}):
		return fmt.Errorf("--store-shared supports --stores=etcd only, not %v", stores)
	}
	return nil
}

// kubeSystemUID reads the kube-system namespace's UID: the cluster's stable identity.
func kubeSystemUID(ctx context.Context, cfg *rest.Config) (string, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return "", fmt.Errorf("cluster identity: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ns); err != nil {
		return "", fmt.Errorf("cluster identity: read the kube-system namespace's UID: %w", err)
	}
	return string(ns.UID), nil
}

// resolveCluster fills c.id and c.installation. Without --store-shared a failure to read
// the kube-system namespace only leaves the cluster field empty (as before).
func (c *clusterConfig) resolve(ctx context.Context, cfg *rest.Config, clusterName, fenceName string) error {
	uid, err := kubeSystemUID(ctx, cfg)
	switch {
	case err != nil && c.shared:
		return fmt.Errorf("--store-shared: %w", err)
	case err != nil:
		setupLog.Info("cannot derive the cluster ID; the endpoints' cluster field stays empty", "error", err.Error())
	}
	c.id = c.clusterID
	if c.id == "" {
		c.id = clusterName
	}
	if c.id == "" {
		c.id = uid
	}
	c.installation = uid + "/" + fenceName
	return nil
}

// newFence is the write fence of the installation: its cluster's fence in a shared store,
// else the installation's own (--store-fence-name), after refusing a prefix laid out for
// several clusters.
func (c clusterConfig) newFence(ctx context.Context, cli *clientv3.Client, prefix, fenceName, holder string, timeout time.Duration) (*fence.Fence, error) {
	if c.shared {
		return fence.NewCluster(cli, prefix, c.id, c.installation, holder, timeout), nil
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := fence.CheckLayout(cctx, cli, prefix); err != nil {
		return nil, err
	}
	return fence.New(cli, fence.Key(prefix, fenceName), holder, timeout), nil
}

// storeCluster is the etcd store's Options.Cluster: the cluster ID when shared.
func (c clusterConfig) storeCluster() string {
	if c.shared {
		return c.id
	}
	return ""
}

// leaseKey is where the endpoint lease is recorded: per cluster when shared.
func (c clusterConfig) leaseKey(prefix, fenceName string) string {
	if c.shared {
		return wire.ClusterLeaseKey(prefix, c.id)
	}
	return etcdstore.LeaseKey(prefix, fenceName)
}
