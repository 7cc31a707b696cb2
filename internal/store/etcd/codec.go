package etcd

import (
	"fmt"
	"strings"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/pkg/wire"
)

// The codec maps endpoints to keys and JSON values and back. It is pure, so it is fuzzed
// (codec_fuzz_test.go) without a server.

// checkSegment rejects a name that would not be exactly one segment of a key: empty, "." or
// "..", or holding a "/" or NUL. path.Join would clean such a name into another key, so a
// write could land outside its scope. The API server never lets such names through; the
// check is defence in depth against a caller bug.
func checkSegment(kind, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s %q is not a valid store key segment", kind, name)
	}
	return nil
}

// checkScope rejects a scope whose service or namespace is not a single key segment.
func checkScope(scope store.Scope) error {
	if err := checkSegment("service", scope.Service); err != nil {
		return err
	}
	return checkSegment("namespace", scope.Namespace)
}

// keyFor is the key of pod in scope under prefix (a cleaned prefix, see New).
func keyFor(prefix string, scope store.Scope, pod string) string {
	return wire.Key(prefix, scope.Service, scope.Namespace, pod)
}

// encodeValue is the JSON value stored for ep.
func encodeValue(ep *store.Endpoint) ([]byte, error) {
	return wire.Encode(ep)
}

// decodeRecord turns one key/value listed under scopePrefix into a Record. A value that is
// not an endpoint's JSON, or a key that is not exactly {scopePrefix}{pod} for one key
// segment, gives a record with an empty Owner: nobody owns it, so registrar never updates
// or deletes it (a guarded write to Key(pod) would miss the real key and fail forever).
func decodeRecord(scopePrefix string, key, value []byte, revision int64) store.Record {
	rec := store.Record{Key: string(key), Revision: revision}
	ep, err := wire.Decode(value)
	if err != nil {
		ep = store.Endpoint{} // not ours to judge: visible but unowned
	}
	rec.Endpoint = ep
	rec.Pod = strings.TrimPrefix(rec.Key, scopePrefix)
	if !strings.HasPrefix(rec.Key, scopePrefix) || checkSegment("pod", rec.Pod) != nil {
		rec.Owner = ""
	}
	return rec
}
