package resource

import (
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func decodeBoth(t testing.TB, c *requestCodec, b []byte) (got, want *discoveryv3.DiscoveryRequest, gotErr, wantErr error) {
	t.Helper()
	got, want = &discoveryv3.DiscoveryRequest{}, &discoveryv3.DiscoveryRequest{}
	gotErr = c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got)
	wantErr = proto.Unmarshal(b, want)
	return got, want, gotErr, wantErr
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("svc-%03d.ns-%d", i, i%7)
	}
	return out
}

// The codec decodes every request as protobuf does: the same message for well-formed
// input, an error where protobuf has one.
func TestRequestCodecDecodesAsProtobuf(t *testing.T) {
	c := newRequestCodec()
	for _, req := range []*discoveryv3.DiscoveryRequest{
		{},
		{TypeUrl: resourcev3.EndpointType},
		{TypeUrl: resourcev3.EndpointType, ResourceNames: names(100), VersionInfo: "p.7", ResponseNonce: "12"},
		{Node: &corev3.Node{Id: "client-1", Cluster: "c"}, TypeUrl: resourcev3.ListenerType, ResourceNames: []string{"a.ns", "", "b.ns"}},
		{TypeUrl: "type.googleapis.com/unknown.Type", ResourceNames: []string{"x"}, ErrorDetail: &statuspb.Status{Code: 3, Message: "rejected"}},
		{ResourceNames: []string{"*"}, ResourceLocators: []*discoveryv3.ResourceLocator{{Name: "loc"}}},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a miss, then a hit of the shared names
			got, want, gotErr, wantErr := decodeBoth(t, c, b)
			if gotErr != nil || wantErr != nil {
				t.Fatalf("%v: codec %v, protobuf %v", req, gotErr, wantErr)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("codec decoded %v, protobuf %v", got, want)
			}
		}
	}
	// Names split by another field, an unknown field, invalid UTF-8, truncated input.
	var split []byte
	split = protowire.AppendTag(split, 3, protowire.BytesType)
	split = protowire.AppendString(split, "a.ns")
	split = protowire.AppendTag(split, 4, protowire.BytesType)
	split = protowire.AppendString(split, resourcev3.EndpointType)
	split = protowire.AppendTag(split, 3, protowire.BytesType)
	split = protowire.AppendString(split, "b.ns")
	split = protowire.AppendTag(split, 99, protowire.VarintType)
	split = protowire.AppendVarint(split, 5)
	got, want, gotErr, wantErr := decodeBoth(t, c, split)
	if gotErr != nil || wantErr != nil || !proto.Equal(got, want) || len(got.GetResourceNames()) != 2 {
		t.Fatalf("split names: codec %v (%v), protobuf %v (%v)", got, gotErr, want, wantErr)
	}
	for name, bad := range map[string][]byte{
		"invalid UTF-8 name":    protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "\xff\xfe"),
		"invalid UTF-8 version": protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xc3"),
		"truncated":             {0x1a, 0x05, 'a'},
		"bad tag":               {0x00},
	} {
		_, _, gotErr, wantErr := decodeBoth(t, c, bad)
		if (gotErr == nil) != (wantErr == nil) || gotErr == nil {
			t.Fatalf("%s: codec error %v, protobuf error %v", name, gotErr, wantErr)
		}
	}
}

// Requests with the same names share them: the second decode allocates no names and its
// strings are the first's, in a list that cannot be appended to in place.
func TestRequestCodecSharesRepeatedNames(t *testing.T) {
	c := newRequestCodec()
	b, err := proto.Marshal(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: names(100), VersionInfo: "v1", ResponseNonce: "1"})
	if err != nil {
		t.Fatal(err)
	}
	first, second := &discoveryv3.DiscoveryRequest{}, &discoveryv3.DiscoveryRequest{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, first); err != nil {
		t.Fatal(err)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, second); err != nil {
		t.Fatal(err)
	}
	if &first.ResourceNames[0] != &second.ResourceNames[0] || cap(first.ResourceNames) != len(first.ResourceNames) {
		t.Fatal("the names of two identical requests are not one shared, full list")
	}
	allocs := testing.AllocsPerRun(100, func() {
		_ = c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &discoveryv3.DiscoveryRequest{})
	})
	// The request, its version and nonce strings (a few more under -race): not the 100
	// names, which protobuf allocates one by one.
	if allocs > 25 {
		t.Fatalf("%v allocations per decode of a request with 100 known names", allocs)
	}
}

func TestNameListsAreBounded(t *testing.T) {
	l := newNameLists(200)
	for i := range 50 {
		b, err := proto.Marshal(&discoveryv3.DiscoveryRequest{ResourceNames: []string{fmt.Sprintf("n-%d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.unmarshal(b, &discoveryv3.DiscoveryRequest{}); err != nil {
			t.Fatal(err)
		}
		cost := 0
		for k, names := range l.lists {
			cost += len(k) + nameListOverhead*len(names)
		}
		if cost != l.bytes || l.bytes > 200 || len(l.lists) == 0 {
			t.Fatalf("%d lists of %d bytes kept (counted %d), bound 200", len(l.lists), cost, l.bytes)
		}
	}
	// A list bigger than a quarter of the bound is decoded, not kept.
	b, _ := proto.Marshal(&discoveryv3.DiscoveryRequest{ResourceNames: []string{strings.Repeat("x", 60)}})
	req := &discoveryv3.DiscoveryRequest{}
	if err := l.unmarshal(b, req); err != nil || len(req.ResourceNames) != 1 || len(req.ResourceNames[0]) != 60 {
		t.Fatalf("a big list: %v, %v", req.ResourceNames, err)
	}
	if _, kept := l.lists[string(b)]; kept {
		t.Fatal("a list bigger than a quarter of the bound was kept")
	}
}

// FuzzRequestCodec: on any input the codec agrees with protobuf (both fail, or both decode
// the same message) and never panics.
func FuzzRequestCodec(f *testing.F) {
	for _, req := range []*discoveryv3.DiscoveryRequest{
		{TypeUrl: resourcev3.EndpointType, ResourceNames: names(3), VersionInfo: "v", ResponseNonce: "n"},
		{Node: &corev3.Node{Id: "x"}, ErrorDetail: &statuspb.Status{Message: "no"}},
	} {
		b, _ := proto.Marshal(req)
		f.Add(b)
	}
	c := newRequestCodec()
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want, gotErr, wantErr := decodeBoth(t, c, b)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("codec error %v, protobuf error %v", gotErr, wantErr)
		}
		if gotErr == nil && !proto.Equal(got, want) {
			t.Fatalf("codec decoded %v, protobuf %v", got, want)
		}
	})
}

// TestNameListsAreBoundedByBytes: the shared name lists hold at most maxNameListBytes (8 MiB),
// however big and many the lists clients send.
func TestNameListsAreBoundedByBytes(t *testing.T) {
	c := newRequestCodec()
	for i := range 100 {
		list := make([]string, 200)
		for j := range list {
			list[j] = fmt.Sprintf("%04d-%04d-%s", i, j, strings.Repeat("x", 1000)) // ~200 KiB per list
		}
		b, err := proto.Marshal(&discoveryv3.DiscoveryRequest{ResourceNames: list})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.names.unmarshal(b, &discoveryv3.DiscoveryRequest{}); err != nil {
			t.Fatal(err)
		}
		kept := 0
		for k := range c.names.lists {
			kept += len(k)
		}
		if kept > maxNameListBytes {
			t.Fatalf("after %d lists of ~200 KiB: %d bytes of names kept, bound 8 MiB", i+1, kept)
		}
	}
}
