package resource_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"

	"github.com/registrar-dev/registrar/internal/xds/locality"
	"github.com/registrar-dev/registrar/internal/xds/resource"
)

// randomEndpoints is a registry's endpoints as the server publishes them: some zones, some
// DRAINING, with or without slow start, a few sharing an address (a pod's IP reused).
func randomEndpoints(rng *rand.Rand, n int, slowStart bool) map[string]resource.Endpoint {
	eps := make(map[string]resource.Endpoint, n)
	for i := range n {
		e := resource.Endpoint{
			Pod:     fmt.Sprintf("web-%d", rng.IntN(4*n+1)),
			Address: fmt.Sprintf("10.0.%d.%d", rng.IntN(3), rng.IntN(200)),
			Port:    8080,
			Zone:    []string{"", "zone-a", "zone-b"}[rng.IntN(3)],
			Health:  corev3.HealthStatus_HEALTHY,
			Weight:  1,
		}
		if rng.IntN(5) == 0 {
			e.Health = corev3.HealthStatus_DRAINING
		}
		if slowStart {
			e.SlowStart, e.Weight = true, uint32(1+rng.IntN(100))
		}
		if i == 0 {
			e.Pod = "ünïcode-pod" // multi-byte UTF-8 in a string the encoding carries
		}
		eps[e.Pod] = e
	}
	return eps
}

func randomRemote(rng *rand.Rand, n int) []locality.Endpoint {
	var out []locality.Endpoint
	for range n {
		out = append(out, locality.Endpoint{
			Cluster: []string{"east", "west"}[rng.IntN(2)], Pod: fmt.Sprintf("api-%d", rng.IntN(50)),
			Address: fmt.Sprintf("10.0.%d.%d", rng.IntN(3), rng.IntN(200)), Port: 8080,
			Zone: []string{"", "zone-c"}[rng.IntN(2)], Health: corev3.HealthStatus_HEALTHY,
			Weight: uint32(1 + rng.IntN(3)), SlowStart: rng.IntN(4) == 0,
		})
	}
	return out
}

// TestAssignmentEncodesAsProtobuf: the assignment Build returns is locality.Build's, and
// its encoding is proto.Marshal's with Deterministic set, byte for byte, over successive
// builds that keep most endpoints (what is reused) and change some.
func TestAssignmentEncodesAsProtobuf(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var a resource.Assignment
		eps := randomEndpoints(rng, rng.IntN(60), seed%3 == 0)
		for round := range 6 {
			var remote []locality.Endpoint
			if seed%2 == 1 {
				remote = randomRemote(rng, rng.IntN(8))
			}
			name := fmt.Sprintf("web.ns-%d", seed)
			cla, enc, dups, err := a.Build(name, eps, remote)
			if err != nil {
				t.Fatalf("seed %d round %d: %v", seed, round, err)
			}
			want, wantDups := reference(name, eps, remote)
			if !proto.Equal(cla, want) || fmt.Sprint(dups) != fmt.Sprint(wantDups) {
				t.Fatalf("seed %d round %d: Build's assignment differs from locality.Build's:\n%v\n%v", seed, round, cla, want)
			}
			wantEnc, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, wantEnc) {
				t.Fatalf("seed %d round %d: encoding differs from proto.Marshal (%d vs %d bytes)", seed, round, len(enc), len(wantEnc))
			}
			checkOpaque(t, cla, enc)
			// The next round keeps most endpoints, changes some, drops and adds a few.
			next := make(map[string]resource.Endpoint, len(eps))
			for pod, e := range eps {
				switch rng.IntN(10) {
				case 0: // gone
				case 1:
					e.Health = corev3.HealthStatus_DRAINING
					next[pod] = e
				default:
					next[pod] = e
				}
			}
			for pod, e := range randomEndpoints(rng, rng.IntN(5), seed%3 == 0) {
				next[pod] = e
			}
			eps = next
		}
	}
}

// checkOpaque: the opaque message of cla marshals to enc, deterministic or not, and keeps
// the name; enc decodes to cla.
func checkOpaque(t *testing.T, cla *endpointv3.ClusterLoadAssignment, enc []byte) {
	t.Helper()
	o := resource.Opaque(cla, enc)
	if o.GetClusterName() != cla.GetClusterName() {
		t.Fatalf("opaque name %q, want %q", o.GetClusterName(), cla.GetClusterName())
	}
	for _, det := range []bool{true, false} {
		got, err := proto.MarshalOptions{Deterministic: det}.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, enc) {
			t.Fatalf("opaque assignment marshals (deterministic %v) to %d bytes unlike its encoding's %d", det, len(got), len(enc))
		}
	}
	var back endpointv3.ClusterLoadAssignment
	if err := proto.Unmarshal(enc, &back); err != nil || !proto.Equal(&back, cla) {
		t.Fatalf("the encoding does not decode to the assignment: %v", err)
	}
}

// TestOpaqueOfOtherBytes: bytes that do not begin with the assignment's name give the
// assignment itself.
func TestOpaqueOfOtherBytes(t *testing.T) {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: "web.ns"}
	if o := resource.Opaque(cla, []byte{0x0a, 0x01, 'x'}); o != cla {
		t.Fatal("Opaque of another name's bytes is not the assignment itself")
	}
	if o := resource.Opaque(cla, nil); o != cla {
		t.Fatal("Opaque of no bytes is not the assignment itself")
	}
}

// reference is the assignment of eps and remote built afresh by locality.Build.
func reference(name string, eps map[string]resource.Endpoint, remote []locality.Endpoint) (*endpointv3.ClusterLoadAssignment, []string) {
	var local []locality.Endpoint
	for _, e := range eps {
		local = append(local, locality.Endpoint{Pod: e.Pod, Address: e.Address, Port: e.Port, Zone: e.Zone, Health: e.Health,
			Weight: e.Weight, SlowStart: e.SlowStart})
	}
	res := locality.Build(local, remote)
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: res.Localities}, res.Duplicates
}

// TestAssignmentEmpty: no endpoint at all encodes as protobuf does (the name only).
func TestAssignmentEmpty(t *testing.T) {
	var a resource.Assignment
	cla, enc, _, err := a.Build("web.ns", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(cla)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, want) {
		t.Fatalf("encoding %x, want %x", enc, want)
	}
	checkOpaque(t, cla, enc)
}

// TestAssignmentInvalidUTF8: an endpoint protobuf cannot encode is an error, with the
// assignment still returned; the next build starts afresh and encodes again once it can.
func TestAssignmentInvalidUTF8(t *testing.T) {
	var a resource.Assignment
	bad := map[string]resource.Endpoint{"x": {Pod: "bad\xff", Address: "10.0.0.1", Port: 80, Health: corev3.HealthStatus_HEALTHY}}
	cla, enc, _, err := a.Build("web.ns", bad, nil)
	if err == nil || enc != nil || cla == nil {
		t.Fatalf("Build of an invalid pod name: err %v, %d bytes, assignment %v; want an error, no bytes, the assignment", err, len(enc), cla)
	}
	good := map[string]resource.Endpoint{"y": {Pod: "good", Address: "10.0.0.1", Port: 80, Health: corev3.HealthStatus_HEALTHY}}
	cla, enc, _, err = a.Build("web.ns", good, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(cla); !bytes.Equal(enc, want) {
		t.Fatal("encoding after an error differs from proto.Marshal")
	}
}
