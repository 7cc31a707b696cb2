// Package wire is the data contract between registrar's stores and the callers that read
// them: the key layout and the JSON value of one endpoint, as DESIGN.md ("Store contract")
// states them. The operator's etcd store writes with it and pkg/discovery (and so
// registrarctl) reads with it, so the two cannot drift apart.
//
// It imports nothing beyond the standard library, so that a caller that only needs to read
// the store can import it without registrar's dependencies.
//
// Layout, under a prefix (DefaultPrefix unless the operator's --store-prefix says otherwise):
//
//	{prefix}/{service}/{namespace}/{pod}   one Endpoint, JSON (Key)
//	{prefix}/.registrar/...                the operator's own keys (write fence, leases) and
//	                                       the coordinated breakers; callers ignore it
//	                                       (ReservedDir, ReservedKey)
package wire

import (
	"encoding/json"
	"path"
	"strings"
	"time"
)

// DefaultPrefix is the key prefix the operator writes under unless its --store-prefix says
// otherwise.
const DefaultPrefix = "/registrar/services"

// ReservedDir is the directory under the prefix that holds registrar's own keys. A leading
// dot is never a service name (those are DNS-1123 labels), so it never collides with
// {prefix}/{service}/.
const ReservedDir = ".registrar"

// Endpoint is one live instance of a service: the JSON value of the key
// {prefix}/{service}/{namespace}/{pod}. Every field is always written (no omitempty), except
// weight, which only registries with slow start write: the bytes are the contract, and a
// reader must tolerate fields it does not know.
type Endpoint struct {
	Service   string `json:"service"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// UID is the pod's UID.
	UID     string           `json:"uid"`
	Address string           `json:"address"`
	Ports   map[string]int32 `json:"ports"`
	Node    string           `json:"node"`
	Zone    string           `json:"zone"`
	Cluster string           `json:"cluster"`
	// Owner identifies the writer (the ServiceRegistry's UID): the operator only ever
	// changes or deletes keys it owns, so prefixes can be shared.
	Owner        string    `json:"owner"`
	RegisteredAt time.Time `json:"registeredAt"`
	// Weight is the instance's share of new requests relative to the others, 1 to
	// FullWeight: an instance in its slow-start window ramps up from a minimum to FullWeight.
	// 0 (absent: registries without slow start do not write it) means FullWeight. Callers
	// pick instances in proportion to EffectiveWeight.
	Weight int32 `json:"weight,omitempty"`
}

// FullWeight is the weight of an instance that is not (or no longer) slowed down.
const FullWeight = 100

// EffectiveWeight is ep's weight for picking: Weight, FullWeight when it is absent (0),
// never below 1 nor above FullWeight.
func (ep *Endpoint) EffectiveWeight() int32 {
	switch {
	case ep.Weight <= 0 || ep.Weight > FullWeight:
		return FullWeight
	default:
		return ep.Weight
	}
}

// Encode is the stored value of ep.
func Encode(ep *Endpoint) ([]byte, error) { return json.Marshal(ep) }

// Decode parses a stored value.
func Decode(value []byte) (Endpoint, error) {
	var ep Endpoint
	err := json.Unmarshal(value, &ep)
	return ep, err
}

// Prefix is prefix in its canonical form: leading slash, no trailing slash, cleaned
// ("a/../b" is "/b"); DefaultPrefix when empty.
func Prefix(prefix string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return path.Clean("/" + strings.Trim(prefix, "/"))
}

// Key is the key of one endpoint: {prefix}/{service}/{namespace}/{pod}.
func Key(prefix, service, namespace, pod string) string {
	return path.Join(Prefix(prefix), service, namespace, pod)
}

// ServicePrefix is the key prefix that holds every instance of service:
// "{prefix}/{service}/"; with an empty service, "{prefix}/" (every key, the reserved
// subtree included).
func ServicePrefix(prefix, service string) string {
	return strings.TrimSuffix(path.Join(Prefix(prefix), service), "/") + "/"
}

// ScopePrefix is the key prefix of the instances of service in namespace:
// "{prefix}/{service}/{namespace}/".
func ScopePrefix(prefix, service, namespace string) string {
	return path.Join(Prefix(prefix), service, namespace) + "/"
}

// ReservedKey is a key of registrar's own under the prefix: {prefix}/.registrar/{elem...}.
// With no elem it is the reserved directory itself, without a trailing slash.
func ReservedKey(prefix string, elem ...string) string {
	return path.Join(append([]string{Prefix(prefix), ReservedDir}, elem...)...)
}

// IsReserved reports whether key lies in the reserved subtree of prefix.
func IsReserved(prefix, key string) bool {
	return strings.HasPrefix(key, ReservedKey(prefix)+"/")
}
