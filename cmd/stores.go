package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/store"
	corednsstore "github.com/registrar-dev/registrar/internal/store/coredns"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/internal/store/multi"
	zkstore "github.com/registrar-dev/registrar/internal/store/zookeeper"
)

// Store kinds --stores accepts (and spec.stores names).
const (
	storeEtcd      = "etcd"
	storeCoreDNS   = "coredns"
	storeZooKeeper = "zookeeper"
)

// storesConfig selects and configures the stores of the installation.
type storesConfig struct {
	stores           string
	corednsEndpoints string
	corednsPath      string
	corednsZone      string
	corednsTTL       time.Duration
	zkServers        string
	zkBasePath       string
	zkPayloadClass   string
	zkPortName       string
	zkSessionTimeout time.Duration
}

func bindStoreFlags(fs *flag.FlagSet, c *storesConfig) {
	fs.StringVar(&c.stores, "stores", storeEtcd, "Comma-separated stores every ServiceRegistry publishes to unless its spec.stores names some: etcd, coredns, zookeeper.")
	fs.StringVar(&c.corednsEndpoints, "coredns-etcd-endpoints", "", "Comma-separated client URLs of the etcd CoreDNS's etcd plugin reads; empty uses the etcd store's (--store-endpoints or the embedded one). TLS uses the --store-*-file flags.")
	fs.StringVar(&c.corednsPath, "coredns-path", corednsstore.DefaultPrefix, "The etcd plugin's path: the key prefix of the DNS records.")
	fs.StringVar(&c.corednsZone, "coredns-zone", corednsstore.DefaultZone, "The DNS zone served from etcd: a service answers as <service>.<namespace>.<zone>.")
	fs.DurationVar(&c.corednsTTL, "coredns-ttl", corednsstore.DefaultTTL, "TTL of every DNS record (whole seconds, at least 1s).")
	fs.StringVar(&c.zkServers, "zookeeper-servers", "", "Comma-separated ZooKeeper host:port list (required with --stores=…zookeeper).")
	fs.StringVar(&c.zkBasePath, "zookeeper-base-path", zkstore.DefaultBasePath, "Curator's basePath: instances go to <base>/<service>/<namespace>.<pod>.")
	fs.StringVar(&c.zkPayloadClass, "zookeeper-payload-class", zkstore.DefaultPayloadClass, "Java class named in each instance payload's @class (Spring Cloud Zookeeper's by default).")
	fs.StringVar(&c.zkPortName, "zookeeper-port-name", "", "Port published as the instance's port; empty: the first port by name. A port named https is the sslPort.")
	fs.DurationVar(&c.zkSessionTimeout, "zookeeper-session-timeout", 30*time.Second, "ZooKeeper session timeout (instances are persistent: an expired session removes nothing).")
}

// names are the configured store kinds, validated.
func (c storesConfig) names() ([]string, error) {
	var names []string
	for _, n := range strings.Split(c.stores, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n != storeEtcd && n != storeCoreDNS && n != storeZooKeeper:
			return nil, fmt.Errorf("--stores: unknown store %q (etcd, coredns, zookeeper)", n)
		case slices.Contains(names, n):
			return nil, fmt.Errorf("--stores: %q twice", n)
		}
		names = append(names, n)
	}
	if slices.Contains(names, storeZooKeeper) && c.zkServers == "" {
		return nil, fmt.Errorf("--stores names zookeeper: --zookeeper-servers is required")
	}
	return names, nil
}

// buildStores opens every store of --stores, each wrapped for metrics, and names them for
// the reconciler, which plans, writes and reports each on its own. Clients it opens close
// when mgr stops. The etcd store is etcdstore.NewOperator's: guarded by guard, with etcdOpts
// (recovery and lease callbacks, batching), and runs as a manager Runnable that, once this replica leads, adopts the endpoint lease and
// probes the store while it is unreachable.
func buildStores(mgr ctrl.Manager, cfg config, cli *clientv3.Client, endpoints []string, guard etcdstore.WriteGuard,
	etcdOpts etcdstore.Options) (*multi.Stores, string, error) {
	names, err := cfg.stores.names()
	if err != nil {
		return nil, "", err
	}
	var named []multi.Named
	var described []string
	for _, name := range names {
		s, where, err := openStore(mgr, cfg, name, cli, endpoints, guard, etcdOpts)
		if err != nil {
			return nil, "", err
		}
		named = append(named, multi.Named{Name: name, Store: store.Instrumented(s, metrics.ObserveStore)})
		described = append(described, fmt.Sprintf("%s (%s)", name, where))
	}
	m, err := multi.New(named, names)
	if err != nil {
		return nil, "", err
	}
	return m, strings.Join(described, ", "), nil
}

func openStore(mgr ctrl.Manager, cfg config, name string, cli *clientv3.Client, endpoints []string, guard etcdstore.WriteGuard,
	etcdOpts etcdstore.Options) (store.Store, string, error) {
	sc := cfg.stores
	switch name {
	case storeCoreDNS:
		dnsCli, dnsEndpoints := cli, endpoints
		if sc.corednsEndpoints != "" {
			dnsEndpoints = strings.Split(sc.corednsEndpoints, ",")
			var err error
			if dnsCli, err = etcdclient.New(etcdclient.Config{
				Endpoints: dnsEndpoints, CAFile: cfg.storeCA, CertFile: cfg.storeCert, KeyFile: cfg.storeKey,
			}); err != nil {
				return nil, "", err
			}
			closeOnStop(mgr, func() { _ = dnsCli.Close() })
		}
		s := corednsstore.New(dnsCli, corednsstore.Options{Prefix: sc.corednsPath, Zone: sc.corednsZone, TTL: sc.corednsTTL, Timeout: cfg.storeTimeout})
		return s, fmt.Sprintf("zone %s in %s", sc.corednsZone, strings.Join(dnsEndpoints, ",")), nil
	case storeZooKeeper:
		servers := strings.Split(sc.zkServers, ",")
		conn, err := zkstore.Connect(servers, sc.zkSessionTimeout)
		if err != nil {
			return nil, "", err
		}
		closeOnStop(mgr, conn.Close)
		s := zkstore.New(conn, zkstore.Options{BasePath: sc.zkBasePath, PayloadClass: sc.zkPayloadClass, PortName: sc.zkPortName, Timeout: cfg.storeTimeout})
		return s, sc.zkServers + sc.zkBasePath, nil
	default:
		s, err := etcdstore.NewOperator(cli, guard, etcdOpts)
		if err != nil {
			return nil, "", err
		}
		if err := mgr.Add(s); err != nil { // probes the store while it is unreachable
			return nil, "", fmt.Errorf("add store monitor: %w", err)
		}
		if err := mgr.Add(etcdstore.LeaseKeeper{Store: s}); err != nil { // every replica, leader or not
			return nil, "", fmt.Errorf("add endpoint lease keeper: %w", err)
		}
		return s, strings.Join(endpoints, ","), nil
	}
}

// closeOnStop runs close when the manager stops.
func closeOnStop(mgr ctrl.Manager, close func()) {
	_ = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		close()
		return nil
	}))
}
