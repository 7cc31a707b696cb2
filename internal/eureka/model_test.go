package eureka

import (
	"testing"
	"time"

	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/wire"
)

func TestHashCode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts map[string]int
		want   string
	}{
		{"empty", nil, ""},
		{"one up", map[string]int{"UP": 1}, "UP_1_"},
		{"alphabetical", map[string]int{"UP": 3, "OUT_OF_SERVICE": 1}, "OUT_OF_SERVICE_1_UP_3_"},
		{"all statuses", map[string]int{"UP": 2, "DOWN": 1, "STARTING": 4, "UNKNOWN": 1, "OUT_OF_SERVICE": 5}, "DOWN_1_OUT_OF_SERVICE_5_STARTING_4_UNKNOWN_1_UP_2_"},
		{"zero counts left out", map[string]int{"UP": 2, "DOWN": 0}, "UP_2_"},
		{"large", map[string]int{"UP": 12345}, "UP_12345_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HashCode(tc.counts); got != tc.want {
				t.Errorf("HashCode(%v) = %q, want %q", tc.counts, got, tc.want)
			}
		})
	}
}

func rec(service, ns, pod, addr string, ports map[string]int32) discovery.Instance {
	return discovery.Instance{Key: wire.Key("", service, ns, pod), Endpoint: wire.Endpoint{
		Service: service, Namespace: ns, Pod: pod, Address: addr, Ports: ports,
		RegisteredAt: time.Date(2026, 12, 5, 5, 0, 0, 0, time.UTC)}}
}

func TestFromInstance(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		ports                  map[string]int32
		port, secure           int32
		portOn, secureOn       bool
		home                   string
		zone, cluster, weight  string
		weightIn               int32
		wantMetadataWithWeight bool
	}{
		{name: "http", ports: map[string]int32{"http": 8080}, port: 8080, portOn: true, secure: 443, home: "http://10.0.0.1:8080/"},
		{name: "only port", ports: map[string]int32{"web": 9000}, port: 9000, portOn: true, secure: 443, home: "http://10.0.0.1:9000/"},
		{name: "http and https", ports: map[string]int32{"http": 8080, "https": 8443}, port: 8080, portOn: true, secure: 8443, secureOn: true, home: "http://10.0.0.1:8080/"},
		{name: "only https", ports: map[string]int32{"https": 8443}, secure: 8443, secureOn: true, home: "https://10.0.0.1:8443/"},
		{name: "several, first by name", ports: map[string]int32{"metrics": 9090, "grpc": 9000}, port: 9000, portOn: true, secure: 443, home: "http://10.0.0.1:9000/"},
		{name: "slow start weight", ports: map[string]int32{"http": 8080}, port: 8080, portOn: true, secure: 443, home: "http://10.0.0.1:8080/", weightIn: 25, weight: "25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := rec("orders", "shop", "orders-1", "10.0.0.1", tc.ports)
			in.Zone, in.Cluster, in.Weight = "z1", "c1", tc.weightIn
			got := FromInstance(&in, 42)
			if got.ID != "orders-1.shop" || got.App != "ORDERS" || got.VIPAddress != "orders" || got.HostName != "10.0.0.1" || got.Status != StatusUp {
				t.Errorf("identity: %+v", got)
			}
			if got.Port != tc.port || got.PortEnabled != tc.portOn || got.SecurePort != tc.secure || got.SecurePortEnabled != tc.secureOn {
				t.Errorf("ports: got %d/%v %d/%v", got.Port, got.PortEnabled, got.SecurePort, got.SecurePortEnabled)
			}
			if got.HomePageURL != tc.home {
				t.Errorf("home %q, want %q", got.HomePageURL, tc.home)
			}
			md := map[string]string{}
			for _, kv := range got.Metadata {
				md[kv[0]] = kv[1]
			}
			if md["zone"] != "z1" || md["cluster"] != "c1" || md["namespace"] != "shop" || md["pod"] != "orders-1" || md["weight"] != tc.weight {
				t.Errorf("metadata %v", md)
			}
			if got.RegisteredMillis != in.RegisteredAt.UnixMilli() || got.UpdatedMillis != 42 {
				t.Errorf("timestamps %d %d", got.RegisteredMillis, got.UpdatedMillis)
			}
		})
	}
}

func TestInstanceID(t *testing.T) {
	single := rec("orders", "shop", "orders-1", "10.0.0.1", nil)
	shared := rec("orders", "shop", "orders-1", "10.0.0.1", nil)
	shared.Key = wire.Key("", "orders", "shop", wire.ClusterPod("c1", "orders-1"))
	noKey := rec("orders", "shop", "orders-1", "10.0.0.1", nil)
	noKey.Key = ""
	for _, tc := range []struct {
		in   discovery.Instance
		want string
	}{{single, "orders-1.shop"}, {shared, "c1.orders-1.shop"}, {noKey, "orders-1.shop"}} {
		if got := InstanceID(&tc.in); got != tc.want {
			t.Errorf("InstanceID(%s) = %q, want %q", tc.in.Key, got, tc.want)
		}
	}
}
