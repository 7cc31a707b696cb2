package locality

import (
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/registrar-dev/registrar/pkg/wire"
)

const (
	healthy  = corev3.HealthStatus_HEALTHY
	draining = corev3.HealthStatus_DRAINING
)

func ep(cluster, pod, addr, zone string, health corev3.HealthStatus) Endpoint {
	return Endpoint{Cluster: cluster, Pod: pod, Address: addr, Port: 80, Zone: zone, Health: health, Weight: 1}
}

func slow(e Endpoint, w uint32) Endpoint {
	e.Weight, e.SlowStart = w, true
	return e
}

// render writes localities one per line: "p<priority> <region>/<zone>/<subzone> w<weight>: pod@addr HEALTH w<weight> ...".
func render(locs []*endpointv3.LocalityLbEndpoints) []string {
	var out []string
	for _, l := range locs {
		var b strings.Builder
		fmt.Fprintf(&b, "p%d %s/%s/%s w%d:", l.GetPriority(), l.GetLocality().GetRegion(), l.GetLocality().GetZone(),
			l.GetLocality().GetSubZone(), l.GetLoadBalancingWeight().GetValue())
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			meta := e.GetMetadata().GetFilterMetadata()[MetadataNamespace].GetFields()
			who := meta["pod"].GetStringValue()
			if c := meta["cluster"].GetStringValue(); c != "" {
				who = c + "." + who
			}
			fmt.Fprintf(&b, " %s@%s:%d %s w%d", who, sa.GetAddress(), sa.GetPortValue(), e.GetHealthStatus(), e.GetLoadBalancingWeight().GetValue())
		}
		out = append(out, b.String())
	}
	return out
}

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		name          string
		local, remote []Endpoint
		want          []string
		duplicates    []string
	}{
		{
			name: "nothing anywhere: no locality (as a single cluster)",
		},
		{
			name:  "local only: one locality per zone at priority 0, exactly as a single cluster",
			local: []Endpoint{ep("", "b", "10.0.0.2", "z2", healthy), ep("", "a", "10.0.0.1", "z1", healthy), ep("", "c", "10.0.0.3", "z1", draining)},
			want: []string{
				"p0 /z1/ w1: a@10.0.0.1:80 HEALTHY w1 c@10.0.0.3:80 DRAINING w1",
				"p0 /z2/ w1: b@10.0.0.2:80 HEALTHY w1",
			},
		},
		{
			name:   "local and remote: remote clusters at priority 1, region = cluster, zone = record's zone",
			local:  []Endpoint{ep("", "a", "10.0.0.1", "z1", healthy)},
			remote: []Endpoint{ep("west", "a", "10.1.0.1", "w1", healthy), ep("west", "b", "10.1.0.2", "w2", healthy), ep("north", "a", "10.2.0.1", "", healthy), ep("west", "c", "10.1.0.3", "w1", healthy)},
			want: []string{
				"p0 /z1/ w1: a@10.0.0.1:80 HEALTHY w1",
				"p1 north// w1: north.a@10.2.0.1:80 HEALTHY w1",
				"p1 west/w1/ w2: west.a@10.1.0.1:80 HEALTHY w1 west.c@10.1.0.3:80 HEALTHY w1",
				"p1 west/w2/ w1: west.b@10.1.0.2:80 HEALTHY w1",
			},
		},
		{
			name:   "no local endpoint: an empty placeholder of weight 1 keeps priority 0, remote at 1",
			remote: []Endpoint{ep("west", "a", "10.1.0.1", "w1", healthy)},
			want: []string{
				"p0 // w1:",
				"p1 west/w1/ w1: west.a@10.1.0.1:80 HEALTHY w1",
			},
		},
		{
			name:   "local endpoints all draining: kept at priority 0 (gRPC skips them and uses priority 1)",
			local:  []Endpoint{ep("", "a", "10.0.0.1", "z1", draining)},
			remote: []Endpoint{ep("west", "a", "10.1.0.1", "w1", healthy)},
			want: []string{
				"p0 /z1/ w1: a@10.0.0.1:80 DRAINING w1",
				"p1 west/w1/ w1: west.a@10.1.0.1:80 HEALTHY w1",
			},
		},
		{
			name:   "a remote address already published is left out (gRPC NACKs a repeated address)",
			local:  []Endpoint{ep("", "a", "10.0.0.1", "z1", healthy)},
			remote: []Endpoint{ep("west", "a", "10.0.0.1", "w1", healthy), ep("west", "b", "10.1.0.2", "w1", healthy), ep("north", "x", "10.1.0.2", "", healthy)},
			want: []string{
				"p0 /z1/ w1: a@10.0.0.1:80 HEALTHY w1",
				"p1 north// w1: north.x@10.1.0.2:80 HEALTHY w1",
			},
			duplicates: []string{"west/a", "west/b"},
		},
		{
			name:       "every remote record a duplicate: no priority 1, no placeholder",
			local:      []Endpoint{ep("", "a", "10.0.0.1", "z1", healthy)},
			remote:     []Endpoint{ep("west", "a", "10.0.0.1", "w1", healthy)},
			want:       []string{"p0 /z1/ w1: a@10.0.0.1:80 HEALTHY w1"},
			duplicates: []string{"west/a"},
		},
		{
			name:   "slow start: one locality per endpoint, per cluster that has it, weight = its weight",
			local:  []Endpoint{slow(ep("", "a", "10.0.0.1", "z1", healthy), 100), slow(ep("", "b", "10.0.0.2", "z1", healthy), 10)},
			remote: []Endpoint{slow(ep("west", "a", "10.1.0.1", "w1", healthy), 40), ep("north", "a", "10.2.0.1", "n1", healthy), ep("north", "b", "10.2.0.2", "n1", healthy)},
			want: []string{
				"p0 /z1/a w100: a@10.0.0.1:80 HEALTHY w100",
				"p0 /z1/b w10: b@10.0.0.2:80 HEALTHY w10",
				"p1 north/n1/ w2: north.a@10.2.0.1:80 HEALTHY w1 north.b@10.2.0.2:80 HEALTHY w1",
				"p1 west/w1/a w40: west.a@10.1.0.1:80 HEALTHY w40",
			},
		},
		{
			name:       "a draining pod and a new pod on its address (IP reuse): the live pod's, once",
			local:      []Endpoint{ep("", "a-old", "10.0.0.1", "z1", draining), ep("", "z-new", "10.0.0.1", "z1", healthy), ep("", "b", "10.0.0.2", "z1", healthy)},
			want:       []string{"p0 /z1/ w2: b@10.0.0.2:80 HEALTHY w1 z-new@10.0.0.1:80 HEALTHY w1"},
			duplicates: []string{"a-old"},
		},
		{
			name:       "the same, the live pod sorted first",
			local:      []Endpoint{ep("", "z-old", "10.0.0.1", "z1", draining), ep("", "a-new", "10.0.0.1", "z2", healthy)},
			remote:     []Endpoint{ep("west", "a", "10.0.0.1", "w1", healthy)},
			want:       []string{"p0 /z2/ w1: a-new@10.0.0.1:80 HEALTHY w1"},
			duplicates: []string{"z-old", "west/a"},
		},
		{
			name:       "two pods of one health on one address: the pod sorted first",
			local:      []Endpoint{ep("", "b", "10.0.0.1", "z1", healthy), ep("", "a", "10.0.0.1", "z1", healthy), ep("", "d", "10.0.0.2", "z1", draining), ep("", "c", "10.0.0.2", "z1", draining)},
			want:       []string{"p0 /z1/ w1: a@10.0.0.1:80 HEALTHY w1 c@10.0.0.2:80 DRAINING w1"},
			duplicates: []string{"b", "d"},
		},
		{
			name:  "one address on two ports is two endpoints",
			local: []Endpoint{ep("", "a", "10.0.0.1", "z1", healthy), {Pod: "b", Address: "10.0.0.1", Port: 81, Zone: "z1", Health: healthy, Weight: 1}},
			want:  []string{"p0 /z1/ w2: a@10.0.0.1:80 HEALTHY w1 b@10.0.0.1:81 HEALTHY w1"},
		},
		{
			name:  "weight 0 counts as 1 (gRPC rejects 0)",
			local: []Endpoint{{Pod: "a", Address: "10.0.0.1", Port: 80, Health: healthy}},
			want:  []string{"p0 // w1: a@10.0.0.1:80 HEALTHY w1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Build(tc.local, tc.remote)
			if g := render(got.Localities); strings.Join(g, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("localities:\n got %s\nwant %s", strings.Join(g, "\n     "), strings.Join(tc.want, "\n     "))
			}
			if strings.Join(got.Duplicates, ",") != strings.Join(tc.duplicates, ",") {
				t.Errorf("duplicates: got %v, want %v", got.Duplicates, tc.duplicates)
			}
			checkGRPCRules(t, got.Localities)
		})
	}
}

// checkGRPCRules checks what grpc-go requires of a ClusterLoadAssignment (see Build):
// contiguous priorities from 0, no locality of weight 0, no locality twice in a priority, no
// address twice, no endpoint of weight 0.
func checkGRPCRules(t *testing.T, locs []*endpointv3.LocalityLbEndpoints) {
	t.Helper()
	prios := map[uint32]bool{}
	seenLoc := map[string]bool{}
	seenAddr := map[string]bool{}
	for _, l := range locs {
		if l.GetLoadBalancingWeight().GetValue() == 0 {
			t.Errorf("locality %v has weight 0", l.GetLocality())
		}
		prios[l.GetPriority()] = true
		id := fmt.Sprintf("%d/%s", l.GetPriority(), l.GetLocality().String())
		if seenLoc[id] {
			t.Errorf("locality %s twice", id)
		}
		seenLoc[id] = true
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			a := fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue())
			if seenAddr[a] {
				t.Errorf("address %s twice", a)
			}
			seenAddr[a] = true
			if e.GetLoadBalancingWeight().GetValue() == 0 {
				t.Errorf("endpoint %s has weight 0", a)
			}
		}
	}
	for i := range len(prios) {
		if !prios[uint32(i)] {
			t.Errorf("priority %d missing of %v", i, prios)
		}
	}
}

func TestFromRecord(t *testing.T) {
	rec := wire.Endpoint{Pod: "web-0", Address: "10.1.0.1", Zone: "w1", Ports: map[string]int32{"grpc": 9000, "http": 80}}
	for _, tc := range []struct {
		name   string
		rec    func(wire.Endpoint) wire.Endpoint
		port   string
		want   Endpoint
		wantOK bool
	}{
		{name: "healthy, weight 1, on the named port", rec: func(r wire.Endpoint) wire.Endpoint { return r }, port: "grpc",
			want: Endpoint{Cluster: "west", Pod: "web-0", Address: "10.1.0.1", Port: 9000, Zone: "w1", Health: healthy, Weight: 1}, wantOK: true},
		{name: "slow-start weight kept", rec: func(r wire.Endpoint) wire.Endpoint { r.Weight = 30; return r }, port: "http",
			want: Endpoint{Cluster: "west", Pod: "web-0", Address: "10.1.0.1", Port: 80, Zone: "w1", Health: healthy, Weight: 30, SlowStart: true}, wantOK: true},
		{name: "weight above full is full", rec: func(r wire.Endpoint) wire.Endpoint { r.Weight = 500; return r }, port: "http",
			want: Endpoint{Cluster: "west", Pod: "web-0", Address: "10.1.0.1", Port: 80, Zone: "w1", Health: healthy, Weight: 100, SlowStart: true}, wantOK: true},
		{name: "no such port", rec: func(r wire.Endpoint) wire.Endpoint { return r }, port: "metrics"},
		{name: "no address", rec: func(r wire.Endpoint) wire.Endpoint { r.Address = ""; return r }, port: "grpc"},
		{name: "port out of range", rec: func(r wire.Endpoint) wire.Endpoint { r.Ports = map[string]int32{"grpc": 70000}; return r }, port: "grpc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FromRecord("west", tc.rec(rec), tc.port)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
