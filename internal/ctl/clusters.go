package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/ctl/output"
	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// clusterView is one cluster publishing into the store: its instances, and, in a shared
// store (--store-shared), the installation holding its write fence and its endpoint lease.
type clusterView struct {
	Cluster string `json:"cluster"`
	// Instances counts the instances whose value names the cluster (of SERVICE, when given).
	Instances int `json:"instances"`
	// Services counts the services they belong to.
	Services int `json:"services"`
	// Installation and Holder are the fence's claim; empty without a fence.
	Installation string `json:"installation,omitempty"`
	Holder       string `json:"holder,omitempty"`
	// Lease is the cluster's endpoint lease (hex), TTLSeconds what is left of it: -1 when it
	// expired (the cluster's registrar is gone: its records are gone or going).
	Lease      string `json:"lease,omitempty"`
	TTLSeconds *int64 `json:"ttlSeconds,omitempty"`
}

// clusters prints every cluster that publishes into the store (or publishes SERVICE).
func (r *runner) clusters(ctx context.Context, args []string) int {
	service := ""
	if len(args) == 1 {
		service = args[0]
	}
	insts, code := r.read(ctx, service)
	if code != ExitOK {
		return code
	}
	byCluster := map[string]*clusterView{}
	services := map[string]map[string]bool{}
	view := func(c string) *clusterView {
		if byCluster[c] == nil {
			byCluster[c] = &clusterView{Cluster: c}
			services[c] = map[string]bool{}
		}
		return byCluster[c]
	}
	for _, inst := range insts {
		v := view(inst.Cluster)
		v.Instances++
		services[inst.Cluster][inst.Service] = true
	}
	fences, code := r.readFences(ctx)
	if code != ExitOK {
		return code
	}
	for c, f := range fences {
		if service != "" && byCluster[c] == nil {
			continue // only the clusters that publish SERVICE
		}
		v := view(c)
		v.Installation, v.Holder, v.Lease, v.TTLSeconds = f.Installation, f.Holder, f.Lease, f.TTLSeconds
	}
	out := make([]clusterView, 0, len(byCluster))
	for c, v := range byCluster {
		v.Services = len(services[c])
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cluster < out[j].Cluster })
	if service != "" && len(insts) == 0 {
		return r.fail(ExitNotFound, "no instances of %q under %s", service, r.opts.prefix)
	}
	if err := r.printClusters(out); err != nil {
		return r.fail(ExitError, "%v", err)
	}
	return ExitOK
}

// readFences reads the fence holder and lease of every cluster recorded under
// {prefix}/.registrar/clusters/.
func (r *runner) readFences(ctx context.Context) (map[string]*clusterView, int) {
	cli, err := r.connect()
	if err != nil {
		return nil, r.fail(ExitError, "%v", err)
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	dir := wire.ClustersDir(r.opts.prefix) + "/"
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return nil, r.fail(storeCode(err), "list %s: %v", dir, err)
	}
	out := map[string]*clusterView{}
	view := func(c string) *clusterView {
		if out[c] == nil {
			out[c] = &clusterView{Cluster: c}
		}
		return out[c]
	}
	for _, kv := range resp.Kvs {
		cluster, what, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), dir), "/")
		if !ok {
			continue
		}
		switch what {
		case "fence":
			var claim wire.FenceClaim
			if err := json.Unmarshal(kv.Value, &claim); err != nil {
				fmt.Fprintf(r.env.Stderr, "registrarctl: skipping %s: %v\n", kv.Key, err)
				continue
			}
			v := view(cluster)
			v.Installation, v.Holder = claim.Installation, claim.Holder
		case "lease":
			id, err := strconv.ParseInt(string(kv.Value), 16, 64)
			if err != nil {
				continue
			}
			v := view(cluster)
			v.Lease = string(kv.Value)
			ttl := int64(-1)
			if l, err := cli.TimeToLive(ctx, clientv3.LeaseID(id)); err == nil && l.TTL > 0 {
				ttl = l.TTL
			}
			v.TTLSeconds = &ttl
		}
	}
	return out, ExitOK
}

func (r *runner) printClusters(views []clusterView) error {
	if ok, err := r.writeData(views); ok {
		return err
	}
	tw := r.out().Table()
	fmt.Fprintln(tw, "CLUSTER\tINSTANCES\tSERVICES\tFENCE INSTALLATION\tFENCE HOLDER\tLEASE\tLEASE TTL")
	for _, v := range views {
		ttl := "-"
		if v.TTLSeconds != nil {
			ttl = "expired"
			if *v.TTLSeconds >= 0 {
				ttl = strconv.FormatInt(*v.TTLSeconds, 10) + "s"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", output.Dash(v.Cluster), v.Instances, v.Services, output.Dash(v.Installation), output.Dash(v.Holder), output.Dash(v.Lease), ttl)
	}
	return tw.Flush()
}

// filterCluster keeps the instances of cluster (all when empty).
// filterNamespace keeps the instances registered from namespace (all when it is empty).
func filterNamespace(insts []discovery.Instance, namespace string) []discovery.Instance {
	if namespace == "" {
		return insts
	}
	out := insts[:0]
	for _, inst := range insts {
		if inst.Namespace == namespace {
			out = append(out, inst)
		}
	}
	return out
}

func filterCluster(insts []discovery.Instance, cluster string) []discovery.Instance {
	if cluster == "" {
		return insts
	}
	out := insts[:0]
	for _, inst := range insts {
		if inst.Cluster == cluster {
			out = append(out, inst)
		}
	}
	return out
}
