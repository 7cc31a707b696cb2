// Package coredns is the DNS backend of the store: it writes SkyDNS records where CoreDNS's
// etcd plugin reads them, so that any DNS client finds the ready pods of a service.
//
// Layout, for service S in namespace N, zone Z (e.g. "registrar.local") and path prefix P
// (CoreDNS's `path`, default /skydns); the domain is reversed into the key:
//
//	P/<Z reversed>/N/S/_tcp/_<port name>/<pod>   one record per pod and named port
//	P/<Z reversed>/N/S/<pod>                     one record per pod when it has no ports
//
// so that `S.N.Z` answers A/AAAA with the pods' IPs, `_<port name>._tcp.S.N.Z` answers SRV
// with their ports (targets `<pod>._<port name>._tcp.S.N.Z`, which answer A), and every
// record carries the scope's TTL (a ServiceRegistry's spec.dns.ttlSeconds) or the Store's. A
// pod whose records carry another TTL is listed as differing, so a TTL change rewrites them.
//
// Each value is a SkyDNS record ({"host","port","priority","weight","ttl"}) with one more
// member, "registrar", holding the whole store.Endpoint including its owner. CoreDNS decodes
// records with encoding/json into its own struct and ignores members it does not know, so the
// ownership metadata never shows in a DNS answer (unlike the `text` member, which would answer
// TXT queries). A record without it, or whose keys disagree about the owner, is nobody's and
// is never touched.
//
// All keys of a pod are written in one transaction, so they share one ModRevision; a listed
// Record's Revision is the newest ModRevision among its keys, and every update or delete is
// guarded by "each old key exists and has not changed since that revision".
package coredns

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
)

// Defaults of Options.
const (
	DefaultPrefix    = "/skydns"
	DefaultZone      = "registrar.local"
	DefaultTTL       = 5 * time.Second
	DefaultTimeout   = 5 * time.Second
	DefaultMaxTxnOps = 128 // etcd's --max-txn-ops default
	// Priority and Weight of every SRV record: all instances are equal.
	Priority = 10
	Weight   = 10
)

// Options configure a Store.
type Options struct {
	// Prefix is CoreDNS's etcd plugin `path`; DefaultPrefix when empty.
	Prefix string
	// Zone is the DNS zone CoreDNS serves from etcd, e.g. "registrar.local"; DefaultZone when empty.
	Zone string
	// TTL of every record, rounded down to whole seconds (at least 1), unless the scope
	// sets one (a ServiceRegistry's spec.dns.ttlSeconds); DefaultTTL when zero.
	TTL time.Duration
	// Timeout bounds every call to etcd; DefaultTimeout when zero.
	Timeout time.Duration
	// MaxTxnOps is the largest number of operations in one transaction; DefaultMaxTxnOps
	// when zero. A pod's keys are never split across transactions.
	MaxTxnOps int
}

// Store writes endpoints as SkyDNS records to the etcd that CoreDNS reads.
type Store struct {
	kv   clientv3.KV
	opts Options
}

var _ store.Store = (*Store)(nil)

// New returns a Store using kv (a *clientv3.Client of the etcd CoreDNS reads).
func New(kv clientv3.KV, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	opts.Prefix = "/" + strings.Trim(opts.Prefix, "/")
	opts.Zone = strings.ToLower(strings.Trim(opts.Zone, "."))
	if opts.Zone == "" {
		opts.Zone = DefaultZone
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = DefaultMaxTxnOps
	}
	return &Store{kv: kv, opts: opts}
}

// ttl is the TTL of scope's records in whole seconds: the scope's, else the Store's.
func (s *Store) ttl(scope store.Scope) uint32 {
	ttl := s.opts.TTL
	if scope.TTL > 0 {
		ttl = scope.TTL
	}
	return uint32(min(max(1, int64(ttl/time.Second)), 1<<31-1))
}

// Domain is the DNS name of the service of scope, e.g. "web.shop.registrar.local.".
func (s *Store) Domain(scope store.Scope) string {
	return scope.Service + "." + scope.Namespace + "." + s.opts.Zone + "."
}

// scopePrefix is the key prefix of scope's records, ending in "/".
func (s *Store) scopePrefix(scope store.Scope) string {
	labels := strings.Split(s.opts.Zone, ".")
	slices.Reverse(labels)
	return path.Join(append([]string{s.opts.Prefix}, append(labels, scope.Namespace, scope.Service)...)...) + "/"
}

// Keys are the store keys of ep in scope, sorted: one per port, or one when it has none.
func (s *Store) Keys(scope store.Scope, ep store.Endpoint) []string {
	prefix := s.scopePrefix(scope)
	if len(ep.Ports) == 0 {
		return []string{prefix + ep.Pod}
	}
	keys := make([]string, 0, len(ep.Ports))
	for name := range ep.Ports {
		keys = append(keys, portKey(prefix, name, ep.Pod))
	}
	slices.Sort(keys)
	return keys
}

func portKey(prefix, port, pod string) string { return prefix + "_tcp/_" + port + "/" + pod }

// Record is the JSON value of one key: a SkyDNS record plus registrar's metadata.
type Record struct {
	Host      string          `json:"host"`
	Port      int32           `json:"port,omitempty"`
	Priority  int             `json:"priority"`
	Weight    int             `json:"weight"`
	TTL       uint32          `json:"ttl"`
	Registrar *store.Endpoint `json:"registrar,omitempty"`
}

// values are the keys and JSON values of ep.
func (s *Store) values(scope store.Scope, ep *store.Endpoint) (map[string]string, error) {
	out := make(map[string]string, max(1, len(ep.Ports)))
	put := func(key string, port int32) error {
		b, err := json.Marshal(Record{Host: ep.Address, Port: port, Priority: Priority, Weight: Weight, TTL: s.ttl(scope), Registrar: ep})
		if err != nil {
			return fmt.Errorf("encode %s: %w", key, err)
		}
		out[key] = string(b)
		return nil
	}
	prefix := s.scopePrefix(scope)
	if len(ep.Ports) == 0 {
		return out, put(prefix+ep.Pod, 0)
	}
	for name, port := range ep.Ports {
		if err := put(portKey(prefix, name, ep.Pod), port); err != nil {
			return nil, err
		}
	}
	return out, nil
}
