// Package locality decides the localities and priorities of one ClusterLoadAssignment from
// this cluster's endpoints of a registry and the records other clusters published for the
// same service and namespace in a shared store (--store-shared). It is pure: no clock, no
// I/O; the xDS server calls it on every change of either side.
//
// The rule (docs/xds.md, "Localities and priorities across clusters"):
//
//   - this cluster's endpoints are at priority 0, one locality per zone (region empty), or
//     one per endpoint (sub_zone = pod) when the registry has slow start;
//   - every other cluster's records are at priority 1, one locality per (cluster, zone):
//     region = the cluster ID, zone = the record's zone (per record, sub_zone = pod, when that
//     cluster writes slow-start weights);
//   - with remote records and no local endpoint, priority 0 keeps one empty placeholder
//     locality, so that priority 1 is never promoted to 0 and back (see Build);
//   - with no remote record, the result is exactly the single-cluster one (priority 0 only);
//   - every address is published once (gRPC rejects an assignment that repeats one): this
//     cluster's live pod before a DRAINING one on the same IP and port, this cluster before
//     others.
package locality

import (
	"sort"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/registrar-dev/registrar/pkg/wire"
)

// MetadataNamespace is the filter_metadata key of each endpoint's metadata: "pod", and
// "cluster" for another cluster's endpoint.
const MetadataNamespace = "registrar.dev"

// Priorities.
const (
	// Local is the priority of this cluster's endpoints.
	Local uint32 = 0
	// Remote is the priority of every other cluster's endpoints.
	Remote uint32 = 1
)

// Endpoint is one endpoint to publish.
type Endpoint struct {
	// Cluster is the cluster ID of another cluster's record; empty for this cluster's.
	Cluster string
	Pod     string
	Address string
	Port    uint32
	Zone    string
	Health  corev3.HealthStatus
	// Weight is the endpoint's load_balancing_weight; 0 counts as 1 (gRPC rejects 0).
	Weight uint32
	// SlowStart is set when the endpoint came with a slow-start weight: its cluster's
	// endpoints then get one locality each (gRPC's round_robin ignores endpoint weights, its
	// locality picker honours locality weights).
	SlowStart bool
}

// hostPort is an endpoint's address and port, as a map key (no string built per endpoint).
type hostPort struct {
	address string
	port    uint32
}

func (e Endpoint) hostPort() hostPort { return hostPort{e.Address, e.Port} }

func (e Endpoint) weight() uint32 { return max(e.Weight, 1) }

// Result is what Build decided.
type Result struct {
	Localities []*endpointv3.LocalityLbEndpoints
	// Duplicates lists the endpoints left out because their address is already published:
	// this cluster's as "pod", other clusters' as "cluster/pod". gRPC rejects a whole
	// ClusterLoadAssignment that repeats an address ("duplicate endpoint with the same
	// address", grpc-go internal/xds/xdsclient/xdsresource/unmarshal_eds.go), so each
	// address is published once (see Build for which endpoint keeps it).
	Duplicates []string
}

// Build turns this cluster's endpoints (local) and other clusters' endpoints (remote, each
// with its Cluster set) into localities with priorities.
//
// What grpc-go (v1.83, internal/xds/xdsclient/xdsresource/unmarshal_eds.go and
// internal/xds/balancer/cdsbalancer/configbuilder.go) requires, and why the placeholder:
//   - priorities must be contiguous from 0, else the whole resource is NACKed ("priority 0
//     missing (with different priorities ... received)");
//   - a locality of weight 0 is ignored as if absent, so every locality, the placeholder
//     included, has weight >= 1 (an ignored placeholder would leave priority 0 missing);
//   - a priority whose localities hold no HEALTHY or UNKNOWN endpoint gets no address and
//     its child policy reports TRANSIENT_FAILURE at once, so the priority policy uses
//     priority 1 without waiting for its 10 s init timer, and goes back to priority 0 as
//     soon as it is READY again. Keeping priority 0 (empty) instead of renumbering the remote
//     localities to 0 keeps the priority's identity stable across the fail-over and back.
//
// Each address (IP and port) is published once. In this cluster, a DRAINING pod and a new
// pod that reuses its IP (the old pod terminating, the new one Registered) share it: the
// HEALTHY one keeps it, and between two of the same health the pod sorted first, so the
// result never depends on the order of the input. A remote record whose address this
// cluster (or a remote cluster sorted before) publishes is left out.
func Build(local, remote []Endpoint) Result { return BuildWith(local, remote, LbEndpoint) }

// BuildWith is Build with each endpoint's LbEndpoint made by lb (LbEndpoint, or one kept
// from an earlier build of the same Endpoint: the result only reads it).
func BuildWith(local, remote []Endpoint, lb func(Endpoint) *endpointv3.LbEndpoint) Result {
	var res Result
	taken := make(map[hostPort]bool, len(local)+len(remote))
	local, res.Duplicates = uniqueLocal(local)
	for _, e := range local {
		taken[e.hostPort()] = true
	}
	byCluster := map[string][]Endpoint{}
	kept := append([]Endpoint(nil), remote...)
	sort.Slice(kept, func(i, j int) bool {
		if kept[i].Cluster != kept[j].Cluster {
			return kept[i].Cluster < kept[j].Cluster
		}
		return kept[i].Pod < kept[j].Pod
	})
	for _, e := range kept {
		if taken[e.hostPort()] {
			res.Duplicates = append(res.Duplicates, e.Cluster+"/"+e.Pod)
			continue
		}
		taken[e.hostPort()] = true
		byCluster[e.Cluster] = append(byCluster[e.Cluster], e)
	}
	res.Localities = group(local, Local, lb)
	if len(byCluster) == 0 {
		return res
	}
	if len(res.Localities) == 0 {
		res.Localities = []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{},
			LoadBalancingWeight: wrapperspb.UInt32(1),
			Priority:            Local,
		}}
	}
	clusters := make([]string, 0, len(byCluster))
	for c := range byCluster {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	for _, c := range clusters {
		res.Localities = append(res.Localities, group(byCluster[c], Remote, lb)...)
	}
	return res
}

// uniqueLocal keeps one of this cluster's endpoints per address: a HEALTHY one before any
// other, then the pod sorted first; the others' pod names are returned, sorted.
func uniqueLocal(local []Endpoint) (kept []Endpoint, dropped []string) {
	byAddr := make(map[hostPort]int, len(local)) // address → index in kept
	kept = make([]Endpoint, 0, len(local))
	for _, e := range local {
		i, ok := byAddr[e.hostPort()]
		if !ok {
			byAddr[e.hostPort()] = len(kept)
			kept = append(kept, e)
			continue
		}
		if prefer(e, kept[i]) {
			e, kept[i] = kept[i], e
		}
		dropped = append(dropped, e.Pod)
	}
	sort.Strings(dropped)
	return kept, dropped
}

// prefer tells whether a keeps an address that b also has: a live (HEALTHY) endpoint before
// a DRAINING one, else the pod sorted first.
func prefer(a, b Endpoint) bool {
	if ah, bh := a.Health == corev3.HealthStatus_HEALTHY, b.Health == corev3.HealthStatus_HEALTHY; ah != bh {
		return ah
	}
	return a.Pod < b.Pod
}

// group makes the localities of one cluster's endpoints at priority: one per zone (sorted),
// or one per endpoint when any of them has a slow-start weight; endpoints sorted by pod, a
// locality's weight the sum of its HEALTHY endpoints' weights, at least 1.
func group(eps []Endpoint, priority uint32, lb func(Endpoint) *endpointv3.LbEndpoint) []*endpointv3.LocalityLbEndpoints {
	weighted := false
	for _, e := range eps {
		weighted = weighted || e.SlowStart
	}
	type locKey struct{ region, zone, subZone string }
	byLoc := map[locKey][]Endpoint{}
	for _, e := range eps {
		k := locKey{region: e.Cluster, zone: e.Zone}
		if weighted {
			k.subZone = e.Pod
		}
		byLoc[k] = append(byLoc[k], e)
	}
	keys := make([]locKey, 0, len(byLoc))
	for k := range byLoc {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.region != b.region {
			return a.region < b.region
		}
		if a.zone != b.zone {
			return a.zone < b.zone
		}
		return a.subZone < b.subZone
	})
	out := make([]*endpointv3.LocalityLbEndpoints, 0, len(keys))
	for _, k := range keys {
		list := byLoc[k]
		sort.Slice(list, func(i, j int) bool { return list[i].Pod < list[j].Pod })
		loc := &endpointv3.LocalityLbEndpoints{
			Locality:    &corev3.Locality{Region: k.region, Zone: k.zone, SubZone: k.subZone},
			Priority:    priority,
			LbEndpoints: make([]*endpointv3.LbEndpoint, 0, len(list)),
		}
		var weight uint32
		for _, e := range list {
			if e.Health == corev3.HealthStatus_HEALTHY {
				weight += e.weight()
			}
			loc.LbEndpoints = append(loc.LbEndpoints, lb(e))
		}
		loc.LoadBalancingWeight = wrapperspb.UInt32(max(weight, 1))
		out = append(out, loc)
	}
	return out
}

// LbEndpoint is the xDS endpoint of e: its socket address, health, weight (at least 1) and
// the pod (and cluster) in its metadata. It depends on nothing but e.
func LbEndpoint(e Endpoint) *endpointv3.LbEndpoint {
	meta := map[string]*structpb.Value{"pod": structpb.NewStringValue(e.Pod)}
	if e.Cluster != "" {
		meta["cluster"] = structpb.NewStringValue(e.Cluster)
	}
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Protocol: corev3.SocketAddress_TCP, Address: e.Address,
				PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.Port},
			}}},
		}},
		HealthStatus:        e.Health,
		LoadBalancingWeight: wrapperspb.UInt32(e.weight()),
		Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			MetadataNamespace: {Fields: meta},
		}},
	}
}

// FromRecord is the endpoint of another cluster's store record (its key's cluster given),
// published on the port named port; ok is false when the record has no usable address or
// no such port. The store holds live instances only (a draining pod's key is deleted when it
// starts terminating) and its value carries no health, so a record is HEALTHY. Its weight
// is its slow-start weight when it has one (1 to wire.FullWeight), else 1, as for this
// cluster's endpoints.
func FromRecord(cluster string, rec wire.Endpoint, port string) (Endpoint, bool) {
	num, ok := rec.Ports[port]
	if !ok || num <= 0 || num > 65535 || rec.Address == "" {
		return Endpoint{}, false
	}
	e := Endpoint{
		Cluster: cluster, Pod: rec.Pod, Address: rec.Address, Port: uint32(num), Zone: rec.Zone,
		Health: corev3.HealthStatus_HEALTHY, Weight: 1,
	}
	if rec.Weight > 0 {
		e.Weight, e.SlowStart = uint32(rec.EffectiveWeight()), true
	}
	return e, true
}
