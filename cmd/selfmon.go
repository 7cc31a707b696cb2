package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/registrar-dev/registrar/internal/monitor"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
)

// selfMonConfig configures registrar's self-monitoring (issue 19; docs/operations.md).
type selfMonConfig struct {
	heartbeatInterval   time.Duration
	healthInterval      time.Duration
	healthTimeout       time.Duration
	canaryInterval      time.Duration
	canaryTimeout       time.Duration
	canaryStoreEndpoint string
	canaryDNSServer     string
}

func bindSelfMonFlags(fs *flag.FlagSet, c *selfMonConfig) {
	fs.DurationVar(&c.heartbeatInterval, "heartbeat-interval", monitor.DefaultHeartbeatInterval, "How often the leader (with --sharding=lease, every replica) writes its own heartbeat {prefix}/.registrar/heartbeat/{cluster}/{replica}, under a lease revoked when it stops (one small write, whatever the number of registries; a leader of a prefix not --store-shared also writes {prefix}/.registrar/heartbeat, for callers that predate per-replica heartbeats); pkg/discovery reports its list stale when no heartbeat of a cluster it lists advances. 0 disables it.")
	fs.DurationVar(&c.healthInterval, "store-health-interval", monitor.DefaultProbeInterval, "How often the leader (with --sharding=lease, every replica: it only reads) probes the etcd cluster of each store (members, leader, raft term, database size against quota, alarms) for the registrar_store_* metrics and the StoreHealthy condition. 0 disables it, the condition and the canaries.")
	fs.DurationVar(&c.healthTimeout, "store-health-timeout", monitor.DefaultProbeTimeout, "Timeout of each call of the store health probe.")
	fs.DurationVar(&c.canaryInterval, "canary-interval", monitor.DefaultCanaryInterval, "How often the leader (with --sharding=lease, every replica) writes its own synthetic endpoint {prefix}/.registrar/canary/{fence}/{cluster}.{replica} and reads it back through the callers' path (registrar_canary_* metrics; failing rounds turn StoreHealthy False). 0 disables it.")
	fs.DurationVar(&c.canaryTimeout, "canary-timeout", 0, "How long a canary round may wait for its write and, separately, for the endpoint to become visible; 0 uses --canary-interval.")
	fs.StringVar(&c.canaryDNSServer, "canary-dns-server", "", "host:port of the CoreDNS that callers query (e.g. its Service's cluster IP:53): with the coredns store, the canary writes <replica>-<hash>._canary._registrar.<zone> (one name per replica) and resolves it there. Empty: no DNS canary.")
	fs.StringVar(&c.canaryStoreEndpoint, "canary-store-endpoints", "", "Comma-separated etcd client URLs the canary reads through, as callers do (e.g. the address callers are given); empty uses the store's. TLS uses the --store-*-file flags.")
}

// selfMonIdentity names this replica's self-monitoring keys (DESIGN.md: per-cluster and
// per-replica keys, one writer never hides or deletes another's).
type selfMonIdentity struct {
	// cluster is the cluster ID (the endpoints' cluster field); replica is --shard-id with
	// --sharding=lease, else the host name (the pod's name).
	cluster, replica string
	// legacy: one replica of one cluster writes the prefix (leader election, no
	// --store-shared), so it also writes the single leader's heartbeat key for callers
	// that predate the per-replica keys.
	legacy bool
}

func selfMonIdentityOf(cfg config) selfMonIdentity {
	id := selfMonIdentity{cluster: cfg.clusterName, legacy: !cfg.sharding.enabled() && !cfg.multicluster.shared}
	if cfg.sharding.enabled() {
		id.replica = cfg.sharding.id
	} else {
		id.replica, _ = os.Hostname()
	}
	return id
}

// setupSelfMonitoring adds the heartbeat, the store probers and the canary (leader-only
// Runnables; with --sharding=lease, no leader election, every replica runs them, each
// writing keys of its own) and returns the probers by store name for the StoreHealthy condition. onChange
// is called when a store's verdict changes (it resyncs every registry).
func setupSelfMonitoring(mgr ctrl.Manager, cfg config, cli *clientv3.Client, endpoints []string, onChange func()) (monitor.Set, error) {
	sm := cfg.selfmon
	log := ctrl.Log.WithName("selfmon")
	who := selfMonIdentityOf(cfg)
	if sm.heartbeatInterval > 0 {
		if err := mgr.Add(&monitor.Heartbeat{KV: cli, Lease: cli, Prefix: cfg.storePrefix, Writer: identity(),
			Cluster: who.cluster, Replica: who.replica, Legacy: who.legacy,
			Interval: sm.heartbeatInterval, Timeout: cfg.storeTimeout, Log: log}); err != nil {
			return nil, fmt.Errorf("add heartbeat: %w", err)
		}
	}
	set := monitor.Set{}
	if sm.healthInterval <= 0 {
		return set, nil
	}
	names, err := cfg.stores.names()
	if err != nil {
		return nil, err
	}
	changed := func(_, _ monitor.Health) { onChange() } // the first verdict too: it adds the condition
	newProber := func(name string, c *clientv3.Client) *monitor.Prober {
		return &monitor.Prober{Store: name, Cluster: c, Interval: sm.healthInterval, Timeout: sm.healthTimeout, OnChange: changed, Log: log}
	}
	if slices.Contains(names, storeEtcd) {
		p := newProber(storeEtcd, cli)
		if sm.canaryInterval > 0 {
			readerEndpoints := endpoints
			if sm.canaryStoreEndpoint != "" {
				readerEndpoints = strings.Split(sm.canaryStoreEndpoint, ",")
			}
			reader, err := etcdclient.New(etcdclient.Config{
				Endpoints: readerEndpoints, CAFile: cfg.storeCA, CertFile: cfg.storeCert, KeyFile: cfg.storeKey,
			})
			if err != nil {
				return nil, fmt.Errorf("canary reader: %w", err)
			}
			path, err := monitor.NewEtcdPath(monitor.EtcdPathConfig{KV: cli, Prefix: cfg.storePrefix, Reader: reader,
				Namespace: fenceName(cfg), Cluster: who.cluster, Replica: who.replica,
				Lease: cli, LeaseTTL: monitor.CanaryLeaseTTL(sm.canaryInterval)})
			if err != nil {
				_ = reader.Close()
				return nil, err
			}
			closeOnStop(mgr, func() { _ = path.Close(); _ = reader.Close() })
			p.Canary = &monitor.Canary{Store: storeEtcd, Path: path, Interval: sm.canaryInterval, Timeout: sm.canaryTimeout,
				OnRound: p.Wake, Log: log}
			if err := mgr.Add(p.Canary); err != nil {
				return nil, fmt.Errorf("add canary: %w", err)
			}
		}
		set[storeEtcd] = p
	}
	if slices.Contains(names, storeCoreDNS) {
		// Its own prober even on the etcd store's cluster: its verdict carries the DNS canary.
		c := cli
		if cfg.stores.corednsEndpoints != "" {
			if c, err = etcdclient.New(etcdclient.Config{
				Endpoints: strings.Split(cfg.stores.corednsEndpoints, ","), CAFile: cfg.storeCA, CertFile: cfg.storeCert, KeyFile: cfg.storeKey,
			}); err != nil {
				return nil, fmt.Errorf("coredns store health client: %w", err)
			}
			closeOnStop(mgr, func() { _ = c.Close() })
		}
		p := newProber(storeCoreDNS, c)
		if sm.canaryInterval > 0 && sm.canaryDNSServer != "" {
			path := monitor.NewDNSPath(c, cfg.stores.corednsPath, cfg.stores.corednsZone, sm.canaryDNSServer, who.cluster, who.replica)
			p.Canary = &monitor.Canary{Store: storeCoreDNS, Path: path, Interval: sm.canaryInterval, Timeout: sm.canaryTimeout,
				OnRound: p.Wake, Log: log}
			if err := mgr.Add(p.Canary); err != nil {
				return nil, fmt.Errorf("add DNS canary: %w", err)
			}
		}
		set[storeCoreDNS] = p
	}
	for _, n := range names {
		p, ok := set[n]
		if !ok {
			continue
		}
		if err := mgr.Add(p); err != nil {
			return nil, fmt.Errorf("add store health probe: %w", err)
		}
	}
	return set, nil
}
