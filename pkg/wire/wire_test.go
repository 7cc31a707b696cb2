package wire_test

import (
	"testing"
	"time"

	"github.com/registrar-dev/registrar/pkg/wire"
)

// TestEncodeIsTheContract pins the bytes of a stored value (DESIGN.md, "Store contract"):
// field names, order and the absence of omitempty. Changing them breaks every caller.
func TestEncodeIsTheContract(t *testing.T) {
	ep := wire.Endpoint{
		Service: "orders", Namespace: "shop", Pod: "orders-0", UID: "u-0", Address: "10.0.0.1",
		Ports: map[string]int32{"http": 8080, "grpc": 9090}, Node: "n1", Zone: "z1", Cluster: "c1",
		Owner: "reg-uid", RegisteredAt: time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC),
	}
	got, err := wire.Encode(&ep)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"service":"orders","namespace":"shop","pod":"orders-0","uid":"u-0","address":"10.0.0.1",` +
		`"ports":{"grpc":9090,"http":8080},"node":"n1","zone":"z1","cluster":"c1","owner":"reg-uid",` +
		`"registeredAt":"2026-11-30T23:00:00Z"}`
	if string(got) != want {
		t.Errorf("Encode =\n%s\nwant\n%s", got, want)
	}
	empty, _ := wire.Encode(&wire.Endpoint{})
	const wantEmpty = `{"service":"","namespace":"","pod":"","uid":"","address":"","ports":null,"node":"","zone":"",` +
		`"cluster":"","owner":"","registeredAt":"0001-01-01T00:00:00Z"}`
	if string(empty) != wantEmpty {
		t.Errorf("Encode(empty) =\n%s\nwant\n%s", empty, wantEmpty)
	}
	back, err := wire.Decode(got)
	if err != nil || back.Owner != ep.Owner || !back.RegisteredAt.Equal(ep.RegisteredAt) || back.Ports["grpc"] != 9090 {
		t.Errorf("Decode(Encode) = %+v, %v", back, err)
	}
	ep.Weight = 28
	weighted, _ := wire.Encode(&ep)
	if want := want[:len(want)-1] + `,"weight":28}`; string(weighted) != want {
		t.Errorf("Encode(weight 28) =\n%s\nwant\n%s", weighted, want)
	}
	if back, err := wire.Decode(weighted); err != nil || back.Weight != 28 {
		t.Errorf("Decode(weight 28) = %+v, %v", back, err)
	}
	if _, err := wire.Decode([]byte("not json")); err == nil {
		t.Error("Decode accepted a value that is not JSON")
	}
}

// TestEffectiveWeight: absent is full, out-of-range values are read as full, never 0.
func TestEffectiveWeight(t *testing.T) {
	for _, tc := range []struct{ weight, want int32 }{
		{0, wire.FullWeight}, {-3, wire.FullWeight}, {1, 1}, {55, 55}, {wire.FullWeight, wire.FullWeight}, {101, wire.FullWeight},
	} {
		ep := wire.Endpoint{Weight: tc.weight}
		if got := ep.EffectiveWeight(); got != tc.want {
			t.Errorf("EffectiveWeight(%d) = %d, want %d", tc.weight, got, tc.want)
		}
	}
}

func TestKeyLayout(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"key default prefix", wire.Key("", "web", "shop", "web-0"), "/registrar/services/web/shop/web-0"},
		{"key trims slashes", wire.Key("/a/b/", "web", "shop", "web-0"), "/a/b/web/shop/web-0"},
		{"key cleans", wire.Key("a/../b", "web", "shop", "web-0"), "/b/web/shop/web-0"},
		{"prefix default", wire.Prefix(""), wire.DefaultPrefix},
		{"prefix root", wire.Prefix("/"), "/"},
		{"service prefix", wire.ServicePrefix("", "web"), "/registrar/services/web/"},
		{"every service", wire.ServicePrefix("/p/", ""), "/p/"},
		{"root every service", wire.ServicePrefix("/", ""), "/"},
		{"scope prefix", wire.ScopePrefix("/p", "web", "shop"), "/p/web/shop/"},
		{"reserved dir", wire.ReservedKey("/p"), "/p/.registrar"},
		{"reserved key", wire.ReservedKey("/p/", "fence", "ns"), "/p/.registrar/fence/ns"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if !wire.IsReserved("/p", "/p/.registrar/fence/x") || wire.IsReserved("/p", "/p/web/shop/web-0") || wire.IsReserved("/p", "/p/.registrarx/a") {
		t.Error("IsReserved misjudges keys")
	}
}

// TestSelfMonitoringKeys: each writer's heartbeat and canary carry its cluster and replica
// in their name, encoded so that no two writers share a key and the cluster reads back.
func TestSelfMonitoringKeys(t *testing.T) {
	const prefix = "/registrar/services"
	for _, tc := range []struct {
		cluster, replica    string
		wantKey, wantCanary string
	}{
		{"east", "registrar-0", prefix + "/.registrar/heartbeat/east/registrar-0", "east.registrar-0"},
		{"", "host.example", prefix + "/.registrar/heartbeat/-/host%2Eexample", "-.host%2Eexample"},
		{"-", "r", prefix + "/.registrar/heartbeat/%2D/r", "%2D.r"},
		{"a/b.c", "r/1", prefix + "/.registrar/heartbeat/a%2Fb%2Ec/r%2F1", "a%2Fb%2Ec.r%2F1"},
	} {
		key := wire.ReplicaHeartbeatKey(prefix, tc.cluster, tc.replica)
		if key != tc.wantKey {
			t.Errorf("ReplicaHeartbeatKey(%q, %q) = %s, want %s", tc.cluster, tc.replica, key, tc.wantKey)
		}
		if c, legacy, ok := wire.ParseHeartbeatKey(prefix, key); !ok || legacy || c != tc.cluster {
			t.Errorf("ParseHeartbeatKey(%s) = %q, %v, %v; want %q", key, c, legacy, ok, tc.cluster)
		}
		if got := wire.CanaryPod(tc.cluster, tc.replica); got != tc.wantCanary {
			t.Errorf("CanaryPod(%q, %q) = %s, want %s", tc.cluster, tc.replica, got, tc.wantCanary)
		}
	}
	if c, legacy, ok := wire.ParseHeartbeatKey(prefix, wire.HeartbeatKey(prefix)); !ok || !legacy || c != "" {
		t.Errorf("the single leader's key parses as %q, %v, %v", c, legacy, ok)
	}
	for _, k := range []string{prefix + "/.registrar/heartbeats/x/y", prefix + "/.registrar/heartbeat/x",
		prefix + "/.registrar/heartbeat/x/y/z", prefix + "/.registrar/canary/x/y"} {
		if _, _, ok := wire.ParseHeartbeatKey(prefix, k); ok {
			t.Errorf("ParseHeartbeatKey accepted %s", k)
		}
	}
}
