// Package resource is what the ADS server puts on the wire and reads from it: the resources
// published for one ServiceRegistry and their shared name "<service>.<namespace>" (the
// Listener, RouteConfiguration and Cluster, which depend on the name only, and the
// ClusterLoadAssignment built from the reconcile's verdicts: Registered pods HEALTHY, a
// Draining pod DRAINING, one locality per zone), the type URLs served, and the gRPC codec
// that decodes DiscoveryRequests with their resource names shared between requests. It
// holds no state of the server's: internal/xds decides when to build and push, and
// internal/xds/clients follows what each client was sent and acknowledged.
package resource

import (
	"fmt"
	"regexp"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/xds/locality"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// MetadataNamespace is the filter_metadata key of each endpoint's metadata (pod name, and
// cluster for another cluster's endpoint).
const MetadataNamespace = locality.MetadataNamespace

var label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ResourceName is the name of every resource published for a registry: the Listener (what an
// xds:///<name> target asks for), its RouteConfiguration, its Cluster and the Cluster's
// ClusterLoadAssignment all share it: "<service>.<namespace>".
func ResourceName(service, namespace string) string { return service + "." + namespace }

// ValidName reports why <service>.<namespace> is not a usable resource name: the service
// must be a DNS-1123 label (a metadata.name with dots, used as the service name, would make
// the name ambiguous and is not a valid host in an xds:/// target).
func ValidName(service, namespace string) error {
	if len(service) > 63 || !label.MatchString(service) {
		return fmt.Errorf("service name %q is not a DNS-1123 label (lowercase letters, digits and '-', at most 63), so %q is not a valid xDS resource name; set spec.serviceName",
			service, ResourceName(service, namespace))
	}
	if !label.MatchString(namespace) {
		return fmt.Errorf("namespace %q is not a DNS-1123 label", namespace)
	}
	return nil
}

// grpcPortName is the port published when a registry has several: the one named "grpc",
// else the first in spec order.
const grpcPortName = "grpc"

// PickPort is the port published of a registry's ports (grpcPortName, else the first); false
// when it has none.
func PickPort(ports []string) (string, bool) {
	for _, p := range ports {
		if p == grpcPortName {
			return p, true
		}
	}
	if len(ports) == 0 {
		return "", false
	}
	return ports[0], true
}

// Endpoint is one endpoint as published.
type Endpoint struct {
	Pod     string
	Address string
	Port    uint32
	Zone    string
	Health  corev3.HealthStatus
	Weight  uint32
	// SlowStart is set when the registry has slow start (the pod came with a weight).
	SlowStart bool
}

// BuildEndpoints maps the reconcile's verdicts to published endpoints: Registered pods are
// HEALTHY; a Draining pod is DRAINING at the address it was published with before (a pod
// that was never published as HEALTHY stays absent); every other pod is absent.
func BuildEndpoints(reg publish.Registry, port string, before map[string]Endpoint) map[string]Endpoint {
	out := make(map[string]Endpoint, len(reg.Pods))
	for _, p := range reg.Pods {
		switch p.State {
		case v1beta1.EndpointRegistered:
			num, ok := p.Endpoint.Ports[port]
			if !ok || p.Endpoint.Address == "" || num <= 0 {
				continue
			}
			out[p.Name] = Endpoint{Pod: p.Name, Address: p.Endpoint.Address, Port: uint32(num),
				Zone: p.Endpoint.Zone, Health: corev3.HealthStatus_HEALTHY, Weight: weightOf(p.Endpoint.Weight),
				SlowStart: p.Endpoint.Weight > 0}
		case v1beta1.EndpointDraining:
			if was, ok := before[p.Name]; ok {
				was.Health = corev3.HealthStatus_DRAINING
				out[p.Name] = was
			}
		}
	}
	return out
}

// weightOf is an endpoint's load_balancing_weight: its slow-start weight (1 to 100), or 1
// for a registry without slow start (every endpoint alike). Never 0: gRPC rejects it.
func weightOf(w int32) uint32 {
	if w <= 0 {
		return 1
	}
	return uint32(min(w, wire.FullWeight))
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// RouterFilterName is the HTTP filter name of the router in the published Listener.
const RouterFilterName = "envoy.filters.http.router"

// listener is what an xds:///<name> target of a proxyless gRPC client asks for: an
// api_listener whose HTTP connection manager takes its routes over ADS (RDS <name>) and
// ends with the router filter.
func listener(name string) (*listenerv3.Listener, error) {
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, fmt.Errorf("marshal router filter: %w", err)
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: name,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		return nil, fmt.Errorf("marshal http connection manager: %w", err)
	}
	return &listenerv3.Listener{Name: name, ApiListener: &listenerv3.ApiListener{ApiListener: hcm}}, nil
}

// routeConfig routes every request of every authority to the cluster <name>.
func routeConfig(name string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{
		Name: name, Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}},
		}},
	}}}
}

// cluster is an EDS cluster whose endpoints are the ClusterLoadAssignment <name> over ADS.
func cluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: name},
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
}

// StaticResources are the Listener, RouteConfiguration and Cluster the server publishes for
// a resource name, keyed by type URL: benchmarks feed the same resources to another control
// plane (bench/xdsfleet), so both serve identical bytes.
func StaticResources(name string) (map[string]types.Resource, error) {
	l, err := listener(name)
	if err != nil {
		return nil, err
	}
	return map[string]types.Resource{
		resourcev3.ListenerType: l,
		resourcev3.RouteType:    routeConfig(name),
		resourcev3.ClusterType:  cluster(name),
	}, nil
}

// TypeURLs are the resource types served, in the order a gRPC client asks for them.
var TypeURLs = []string{resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ClusterType, resourcev3.EndpointType}

// ShortType is the type label of the xDS metrics: lds, rds, cds, eds (other for a type not
// served).
func ShortType(typeURL string) string {
	switch typeURL {
	case resourcev3.ListenerType:
		return "lds"
	case resourcev3.RouteType:
		return "rds"
	case resourcev3.ClusterType:
		return "cds"
	case resourcev3.EndpointType:
		return "eds"
	}
	return "other"
}
