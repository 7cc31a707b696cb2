package resource

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// requestCodec is the ADS server's gRPC codec (NewRequestCodec): protobuf, except that a state-of-the-world
// DiscoveryRequest's resource names are shared between requests that name the same ones.
// Every ACK of a gRPC client repeats all the names it subscribes to; decoding them into
// new strings was 40 % of the bytes the operator allocated in `make bench-xds` (100 names
// per ACK, thousands of ACKs a second). Here the names' bytes are looked up in a set of
// the name lists seen before, bounded by bytes (maxNameListBytes); a hit costs no allocation, and the names are the very
// strings of the previous request, so comparing them with it (clients.Tracker.Request,
// the xds package's adsStream.subscribeEDS) is a pointer comparison each. The other fields decode as protobuf
// does. The shared lists are read-only: their capacity is their length, so an append copies.
type requestCodec struct {
	base  encoding.CodecV2
	names *nameLists
}

// NewRequestCodec is the codec the ADS server forces (grpc.ForceServerCodecV2).
func NewRequestCodec() encoding.CodecV2 { return newRequestCodec() }

func newRequestCodec() *requestCodec {
	return &requestCodec{base: encoding.GetCodecV2(grpcproto.Name), names: newNameLists(maxNameListBytes)}
}

// Name is the codec's content subtype: it replaces the proto codec on the ADS server.
func (c *requestCodec) Name() string { return grpcproto.Name }

// Marshal marshals as protobuf.
func (c *requestCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

// Unmarshal decodes a DiscoveryRequest with shared resource names; anything else as
// protobuf.
func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*discoveryv3.DiscoveryRequest)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return c.names.unmarshal(buf.ReadOnlyData(), req)
}

// maxNameListBytes bounds the memory of the name lists kept (their wire bytes and a string
// header per name): there are as many lists as clients subscribe with different names
// (usually a handful, about 25 bytes per name), and whatever a client sends (each request at
// most MaxRequestBytes) never makes the set hold more.
const maxNameListBytes = 8 << 20

// nameListOverhead is what a list costs beyond its wire bytes, per name (a string header).
const nameListOverhead = 16

// nameLists maps the wire bytes of a request's resource_names to the decoded names.
type nameLists struct {
	maxBytes int
	mu       sync.RWMutex
	bytes    int // the cost of the lists kept (maxNameListBytes)
	lists    map[string][]string
}

func newNameLists(maxBytes int) *nameLists {
	return &nameLists{maxBytes: maxBytes, lists: map[string][]string{}}
}

var errInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// unmarshal decodes b into req: resource_names (field 3) through the shared lists,
// version_info, type_url and response_nonce (1, 4, 5) directly, every other field by
// protobuf from its own bytes.
func (l *nameLists) unmarshal(b []byte, req *discoveryv3.DiscoveryRequest) error {
	req.Reset()
	var rest []byte
	var spans [][2]int // the resource_names fields, tag included
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return fmt.Errorf("decode DiscoveryRequest: %w", protowire.ParseError(n))
		}
		var m int
		if typ == protowire.BytesType && (num == 1 || num == 3 || num == 4 || num == 5) {
			v, vn := protowire.ConsumeBytes(b[off+n:])
			if vn < 0 {
				return fmt.Errorf("decode DiscoveryRequest field %d: %w", num, protowire.ParseError(vn))
			}
			m = vn
			switch num {
			case 3:
				spans = append(spans, [2]int{off, off + n + m})
			default:
				if !utf8.Valid(v) {
					return fmt.Errorf("decode DiscoveryRequest field %d: %w", num, errInvalidUTF8)
				}
				switch num {
				case 1:
					req.VersionInfo = string(v)
				case 4:
					req.TypeUrl = typeURL(v)
				case 5:
					req.ResponseNonce = string(v)
				}
			}
		} else {
			m = protowire.ConsumeFieldValue(num, typ, b[off+n:])
			if m < 0 {
				return fmt.Errorf("decode DiscoveryRequest field %d: %w", num, protowire.ParseError(m))
			}
			rest = append(rest, b[off:off+n+m]...)
		}
		off += n + m
	}
	if len(rest) > 0 {
		if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(rest, req); err != nil {
			return fmt.Errorf("decode DiscoveryRequest: %w", err)
		}
	}
	if len(spans) == 0 {
		return nil
	}
	key := b[spans[0][0]:spans[len(spans)-1][1]]
	if !contiguous(spans) { // other fields between the names: rare; key their bytes alone
		key = nil
		for _, s := range spans {
			key = append(key, b[s[0]:s[1]]...)
		}
	}
	names, err := l.lookup(key)
	if err != nil {
		return err
	}
	req.ResourceNames = names
	return nil
}

func contiguous(spans [][2]int) bool {
	for i := 1; i < len(spans); i++ {
		if spans[i][0] != spans[i-1][1] {
			return false
		}
	}
	return true
}

// lookup returns the names encoded in key (resource_names fields, tags included), shared
// with every request that sent the same bytes.
func (l *nameLists) lookup(key []byte) ([]string, error) {
	l.mu.RLock()
	names, ok := l.lists[string(key)]
	l.mu.RUnlock()
	if ok {
		return names, nil
	}
	k := string(key) // the names are substrings of this copy
	for off := 0; off < len(key); {
		_, _, n := protowire.ConsumeTag(key[off:])
		if n < 0 {
			return nil, fmt.Errorf("decode DiscoveryRequest resource_names: %w", protowire.ParseError(n))
		}
		v, vn := protowire.ConsumeBytes(key[off+n:])
		if vn < 0 {
			return nil, fmt.Errorf("decode DiscoveryRequest resource_names: %w", protowire.ParseError(vn))
		}
		if !utf8.Valid(v) {
			return nil, fmt.Errorf("decode DiscoveryRequest resource_names: %w", errInvalidUTF8)
		}
		start := off + n + vn - len(v)
		names = append(names, k[start:start+len(v)])
		off += n + vn
	}
	names = names[:len(names):len(names)]
	cost := len(k) + nameListOverhead*len(names)
	if cost > l.maxBytes/4 {
		return names, nil // too big to share: decoded for this request only
	}
	l.mu.Lock()
	if _, ok := l.lists[k]; !ok {
		if l.bytes+cost > l.maxBytes {
			clear(l.lists) // many different lists: start over rather than grow
			l.bytes = 0
		}
		l.lists[k] = names
		l.bytes += cost
	}
	l.mu.Unlock()
	return names, nil
}

// typeURL returns the type URL, as the served types' constant when it is one of them.
func typeURL(v []byte) string {
	for _, t := range TypeURLs {
		if string(v) == t {
			return t
		}
	}
	return string(v)
}
