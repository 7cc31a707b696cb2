package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/registrar-dev/registrar/internal/sharding"
	"github.com/registrar-dev/registrar/internal/store/etcd/fence"
)

// Values of --sharding.
const (
	shardingNone  = "none"
	shardingLease = "lease"
)

// shardingConfig is what the --shard* flags set.
type shardingConfig struct {
	mode           string
	count          int
	id             string
	leaseNamespace string
	leaseDuration  time.Duration
	renewPeriod    time.Duration
}

func bindShardingFlags(fs *flag.FlagSet, c *shardingConfig) {
	fs.StringVar(&c.mode, "sharding", shardingNone, "How replicas share the ServiceRegistries: none (leader election: one replica writes) or lease (every replica writes the namespaces of its shards; membership by one Lease per replica; replaces --leader-elect; not with --xds-bind-address, which serves every registry from the leader). See docs/sharding.md.")
	fs.IntVar(&c.count, "shard-count", 32, "Number of shards namespaces are hashed into (with --sharding=lease); the same on every replica, changed only with all replicas stopped.")
	fs.StringVar(&c.id, "shard-id", "", "This replica's member name in the shard ring (default: the host name, the pod's name in a cluster); unique among the replicas.")
	fs.StringVar(&c.leaseNamespace, "shard-lease-namespace", "", "Namespace of the member Leases (default: as --leader-election-namespace).")
	fs.DurationVar(&c.leaseDuration, "shard-lease-duration", 15*time.Second, "How long a replica counts as a member after its last renewal; a replica that dies is taken over after about this long (one that stops cleanly at once).")
	fs.DurationVar(&c.renewPeriod, "shard-renew-period", 2*time.Second, "How often a replica renews its Lease, reads the members and hands shards over (at most a third of --shard-lease-duration).")
}

func (c *shardingConfig) enabled() bool { return c.mode == shardingLease }

// validate checks the flags, and turns leader election off when sharding replaces it.
func (c *shardingConfig) validate(cfg *config) error {
	switch c.mode {
	case shardingNone, "":
		return nil
	case shardingLease:
	default:
		return fmt.Errorf("--sharding=%q: want none or lease", c.mode)
	}
	if c.count < 1 || c.count > 4096 {
		return fmt.Errorf("--shard-count=%d: want 1 to 4096", c.count)
	}
	if c.id == "" {
		c.id, _ = os.Hostname()
	}
	if c.id == "" {
		return fmt.Errorf("--sharding=lease needs --shard-id (no host name)")
	}
	if c.renewPeriod <= 0 || 3*c.renewPeriod > c.leaseDuration {
		return fmt.Errorf("--sharding=lease needs 0 < 3 × --shard-renew-period ≤ --shard-lease-duration")
	}
	if cfg.storeLeaseTTL > 0 {
		return fmt.Errorf("--store-lease-ttl is not supported with --sharding=lease yet (one endpoint lease per installation)")
	}
	if cfg.xds.bindAddress != "" {
		// Every replica that serves callers serves every registry, current (DESIGN.md): a
		// sharded replica's xDS server would publish its own shards only, and keep publishing
		// a shard handed to another replica as it last saw it.
		return fmt.Errorf("--sharding=lease cannot be combined with --xds-bind-address: each replica would serve " +
			"over xDS only the registries of its own shards, and keep serving those handed to another replica frozen; " +
			"run the xDS server with --sharding=none (leader election), or drop --xds-bind-address (docs/sharding.md)")
	}
	cfg.leaderElect = false // the shard fences replace the leader's
	return nil
}

// leaseNamespaceOf is --shard-lease-namespace, else the leader election namespace, else
// the pod's namespace.
func leaseNamespaceOf(cfg config) string {
	if cfg.sharding.leaseNamespace != "" {
		return cfg.sharding.leaseNamespace
	}
	return fenceName(config{leaderElectionNamespace: cfg.leaderElectionNamespace})
}

// setupSharding adds the shard Coordinator to mgr and returns it with the per-shard write
// fences that guard the etcd store.
func setupSharding(mgr ctrl.Manager, cfg config, cli *clientv3.Client) (*sharding.Coordinator, *fence.Shards, error) {
	ring := fenceName(cfg)
	fences := fence.NewShards(cli, cfg.storePrefix, ring, cfg.sharding.id, cfg.sharding.count, cfg.storeTimeout)
	coord := sharding.NewCoordinator(sharding.Config{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Namespace: leaseNamespaceOf(cfg), Ring: ring, Identity: cfg.sharding.id,
		Shards: cfg.sharding.count, LeaseDuration: cfg.sharding.leaseDuration, RenewPeriod: cfg.sharding.renewPeriod,
		Fences: fences, Clock: clock.RealClock{}, Log: ctrl.Log.WithName("sharding"),
	})
	if err := mgr.Add(coord); err != nil {
		return nil, nil, fmt.Errorf("add shard coordinator: %w", err)
	}
	return coord, fences, nil
}
