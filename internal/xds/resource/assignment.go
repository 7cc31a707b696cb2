package resource

import (
	"bytes"
	"fmt"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/registrar-dev/registrar/internal/xds/locality"
)

// Assignment builds one registry's ClusterLoadAssignment: this cluster's endpoints and, in a
// shared store, other clusters' records of the same service and namespace
// (internal/xds/locality): this cluster's at priority 0, one locality per zone (per endpoint
// with slow start), others at priority 1; with no remote record exactly the single-cluster
// assignment.
//
// A registry with slow start (an endpoint came with a weight) gets one locality per endpoint
// (zone, and sub_zone = the pod): gRPC's round_robin ignores endpoint weights, but its
// locality picker (weighted_target) honours locality weights, so each endpoint's share of a
// gRPC client's RPCs is then its weight over the total. Envoy honours the endpoint weights.
//
// It builds the assignment together with its deterministic encoding, the bytes the state-of-the-world streams are sent and a
// publish is compared by. It keeps each endpoint's LbEndpoint and encoding from one build
// to the next, so a change of one endpoint of 2,000 builds and encodes that one and copies
// the others' bytes (make bench-rollout: building and encoding the whole assignment per
// change was most of a 2,000-pod publish). The encoding is the one proto.Marshal gives with
// Deterministic set, byte for byte (assignment_test.go checks it against proto.Marshal).
// The zero value is ready; it is not safe for concurrent use.
type Assignment struct {
	prev map[locality.Endpoint]builtEndpoint
}

// builtEndpoint is an endpoint's LbEndpoint (never modified once built) and its encoding.
type builtEndpoint struct {
	pb  *endpointv3.LbEndpoint
	enc []byte
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// Build returns the assignment of eps and remote named name, its encoding, and the
// endpoints left out as duplicates (locality.Build). On an error (an endpoint that protobuf
// cannot encode, e.g. a string that is not UTF-8) the assignment is still returned, without
// its encoding, and nothing is kept for the next build.
func (a *Assignment) Build(name string, eps map[string]Endpoint, remote []locality.Endpoint) (*endpointv3.ClusterLoadAssignment, []byte, []string, error) {
	local := make([]locality.Endpoint, 0, len(eps))
	for _, e := range eps {
		local = append(local, locality.Endpoint{
			Pod: e.Pod, Address: e.Address, Port: e.Port, Zone: e.Zone, Health: e.Health, Weight: e.Weight, SlowStart: e.SlowStart,
		})
	}
	next := make(map[locality.Endpoint]builtEndpoint, len(local)+len(remote))
	encOf := make(map[*endpointv3.LbEndpoint][]byte, len(local)+len(remote))
	var encErr error
	endpointBytes := 0 // the LbEndpoints' encodings, to size the assignment's buffer once
	res := locality.BuildWith(local, remote, func(e locality.Endpoint) *endpointv3.LbEndpoint {
		b, ok := a.prev[e]
		if !ok {
			b.pb = locality.LbEndpoint(e)
			enc, err := deterministic.Marshal(b.pb)
			if err != nil && encErr == nil {
				encErr = fmt.Errorf("endpoint %s/%s: %w", e.Cluster, e.Pod, err)
			}
			b.enc = enc
		}
		next[e] = b
		encOf[b.pb] = b.enc
		endpointBytes += len(b.enc)
		return b.pb
	})
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: res.Localities}
	if encErr != nil {
		a.prev = nil
		return cla, nil, res.Duplicates, encErr
	}
	a.prev = next
	enc, err := encodeAssignment(cla, encOf, endpointBytes+len(encOf)*4)
	if err != nil {
		return cla, nil, res.Duplicates, err
	}
	return cla, enc, res.Duplicates, nil
}

// The field numbers of envoy.config.endpoint.v3.ClusterLoadAssignment and
// LocalityLbEndpoints that encodeAssignment writes itself.
const (
	claClusterName   protowire.Number = 1
	claEndpoints     protowire.Number = 2
	localityLocality protowire.Number = 1
	localityLbEps    protowire.Number = 2
)

// encodeAssignment encodes cla as proto.Marshal does with Deterministic set (fields in
// field-number order, each message length-prefixed), taking each LbEndpoint's bytes from
// encOf, into a buffer of capacity about size (the endpoints' bytes and their field headers).
// Only the fields locality.Build sets are written that way; an assignment with any
// other is marshaled whole.
func encodeAssignment(cla *endpointv3.ClusterLoadAssignment, encOf map[*endpointv3.LbEndpoint][]byte, size int) ([]byte, error) {
	if cla.Policy != nil || len(cla.NamedEndpoints) > 0 || len(cla.ProtoReflect().GetUnknown()) > 0 {
		return deterministic.Marshal(cla)
	}
	size += len(cla.ClusterName) + 8 + 64*len(cla.Endpoints)
	b := make([]byte, 0, size)
	if cla.ClusterName != "" {
		b = protowire.AppendTag(b, claClusterName, protowire.BytesType)
		b = protowire.AppendString(b, cla.ClusterName)
	}
	var loc []byte
	for _, l := range cla.Endpoints {
		var err error
		if loc, err = encodeLocality(loc[:0], l, encOf); err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, claEndpoints, protowire.BytesType)
		b = protowire.AppendBytes(b, loc)
	}
	return b, nil
}

// encodeLocality appends the encoding of l to b: its locality (field 1), its LbEndpoints
// (field 2, from encOf), then its load_balancing_weight and priority (fields 3 and 5, as
// protobuf encodes them). A locality with any other field set is marshaled whole.
func encodeLocality(b []byte, l *endpointv3.LocalityLbEndpoints, encOf map[*endpointv3.LbEndpoint][]byte) ([]byte, error) {
	if l.Metadata != nil || l.Proximity != nil || l.LbConfig != nil || len(l.ProtoReflect().GetUnknown()) > 0 {
		return deterministic.MarshalAppend(b, l)
	}
	if l.Locality != nil {
		loc, err := deterministic.Marshal(l.Locality)
		if err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, localityLocality, protowire.BytesType)
		b = protowire.AppendBytes(b, loc)
	}
	for _, lb := range l.LbEndpoints {
		enc, ok := encOf[lb]
		if !ok {
			var err error
			if enc, err = deterministic.Marshal(lb); err != nil {
				return nil, err
			}
		}
		b = protowire.AppendTag(b, localityLbEps, protowire.BytesType)
		b = protowire.AppendBytes(b, enc)
	}
	// The remaining fields (load_balancing_weight 3, priority 5), as protobuf encodes them.
	return deterministic.MarshalAppend(b, &endpointv3.LocalityLbEndpoints{
		LoadBalancingWeight: l.LoadBalancingWeight, Priority: l.Priority,
	})
}

// Opaque is cla as a message whose encoding is encoded (cla's deterministic encoding, from
// Build) without encoding anything again: the cluster name set, everything after it held as
// the message's unknown fields, which protobuf writes back verbatim. It is what the delta
// streams' cache (go-control-plane's LinearCache, which marshals each resource it is given
// to hash and send it) gets, so that a 2,000-endpoint assignment is not marshaled a second
// time per publish; on the wire it is the same bytes (assignment_test.go). Its fields other
// than the name read as empty: nothing but the encoding may read it. When encoded does not
// begin with cla's name field, cla itself is returned.
func Opaque(cla *endpointv3.ClusterLoadAssignment, encoded []byte) *endpointv3.ClusterLoadAssignment {
	var head []byte
	if cla.ClusterName != "" {
		head = protowire.AppendTag(head, claClusterName, protowire.BytesType)
		head = protowire.AppendString(head, cla.ClusterName)
	}
	if encoded == nil || !bytes.HasPrefix(encoded, head) {
		return cla
	}
	out := &endpointv3.ClusterLoadAssignment{ClusterName: cla.ClusterName}
	if rest := encoded[len(head):]; len(rest) > 0 {
		out.ProtoReflect().SetUnknown(rest)
	}
	return out
}
