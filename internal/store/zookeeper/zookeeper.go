// Package zookeeper is the ZooKeeper backend of the store, in Apache Curator's service
// discovery layout (curator-x-discovery), so that a JVM service using Curator's
// ServiceDiscovery, Spring Cloud Zookeeper or Dubbo finds Kubernetes pods with no code change.
//
// Layout: one znode per pod at {basePath}/{serviceName}/{namespace}.{pod} holding Curator's
// ServiceInstance JSON (name, id, address, port, sslPort, payload, registrationTimeUTC,
// serviceType, uriSpec). Namespaces have no dots, so the id splits back unambiguously.
//
// The znodes are PERSISTENT, not ephemeral, and carry their owner in the payload's metadata
// ("registrar.dev/owner"). Ephemeral nodes would tie every instance to the operator's session:
// an operator restart, a long GC pause or a network blip longer than the session timeout would
// make every healthy instance of every service vanish at once, and come back only when the
// operator re-registered them. With persistent nodes a lost session changes nothing in the
// registry; the client opens a new session and the next reconcile (a full resync after a
// restart) writes only the difference. The price is that a registrar that is gone for good
// leaves its nodes behind until another installation (or a person) removes them — the same
// contract as the etcd store: no lease in the removal path.
//
// Writes are guarded: a record's Revision is the znode's mzxid (which also changes when a node
// is deleted and created again); Apply reads each node it changes, fails with ErrConflict if
// its mzxid moved, and then writes all changes in one multi operation guarded by the znode
// versions it read.
package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/registrar-dev/registrar/internal/store"
)

// Defaults of Options.
const (
	DefaultBasePath     = "/services" // Spring Cloud Zookeeper's default discovery root
	DefaultPayloadClass = "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance"
	DefaultTimeout      = 5 * time.Second
	DefaultMaxOps       = 128
	// DefaultMaxMultiBytes is half of ZooKeeper's jute.maxbuffer default (1 MB less one
	// byte), the largest request a server accepts: a server closes the connection of a
	// client that sends more.
	DefaultMaxMultiBytes = 512 << 10
)

// Metadata keys of the payload.
const (
	MetaOwner        = "registrar.dev/owner"
	MetaNamespace    = "registrar.dev/namespace"
	MetaPod          = "registrar.dev/pod"
	MetaUID          = "registrar.dev/uid"
	MetaNode         = "registrar.dev/node"
	MetaZone         = "registrar.dev/zone"
	MetaCluster      = "registrar.dev/cluster"
	MetaRegisteredAt = "registrar.dev/registered-at"
	// MetaWeight is the endpoint's slow-start weight (wire.Endpoint.Weight), only when set.
	MetaWeight = "registrar.dev/weight"
	// MetaPortPrefix + port name holds each named port.
	MetaPortPrefix = "registrar.dev/port."
)

// Options configure a Store.
type Options struct {
	// BasePath is Curator's basePath; DefaultBasePath when empty.
	BasePath string
	// PayloadClass is the Java class named by the payload's "@class" (Curator deserialises the
	// payload polymorphically): Spring Cloud Zookeeper's ZookeeperInstance by default; Dubbo's
	// is org.apache.dubbo.registry.zookeeper.ZookeeperInstance. Both have {id, name, metadata}.
	PayloadClass string
	// PortName picks the port published as "port"; when empty or absent, the first port by
	// name. A port named "https" is published as "sslPort" too, and the uriSpec then uses it.
	PortName string
	// Timeout bounds every call to ZooKeeper; DefaultTimeout when zero.
	Timeout time.Duration
	// MaxOps is the largest number of operations in one multi; DefaultMaxOps when zero.
	MaxOps int
	// MaxMultiBytes bounds the paths and data of one multi (an operation larger than this
	// alone still goes in one); DefaultMaxMultiBytes when zero. It must stay below the
	// servers' jute.maxbuffer.
	MaxMultiBytes int
}

// Store writes endpoints to ZooKeeper as Curator service instances.
type Store struct {
	conn *zk.Conn
	opts Options
}

var _ store.Store = (*Store)(nil)

// New returns a Store using conn.
func New(conn *zk.Conn, opts Options) *Store {
	opts.BasePath = "/" + strings.Trim(opts.BasePath, "/")
	if opts.BasePath == "/" {
		opts.BasePath = DefaultBasePath
	}
	if opts.PayloadClass == "" {
		opts.PayloadClass = DefaultPayloadClass
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxOps <= 0 {
		opts.MaxOps = DefaultMaxOps
	}
	if opts.MaxMultiBytes <= 0 {
		opts.MaxMultiBytes = DefaultMaxMultiBytes
	}
	return &Store{conn: conn, opts: opts}
}

// Connect opens a ZooKeeper client session that reconnects (and opens a new session after
// expiry) in the background. It does not wait for a server to answer.
func Connect(servers []string, sessionTimeout time.Duration) (*zk.Conn, error) {
	conn, _, err := zk.Connect(servers, sessionTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("connect to ZooKeeper %v: %w", servers, err)
	}
	return conn, nil
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// servicePath is {basePath}/{service}.
func (s *Store) servicePath(scope store.Scope) string {
	return path.Join(s.opts.BasePath, scope.Service)
}

// Path is the znode of pod in scope.
func (s *Store) Path(scope store.Scope, pod string) string {
	return s.servicePath(scope) + "/" + scope.Namespace + "." + pod
}

// Instance is Curator's ServiceInstance as JSON, in the order Jackson writes its fields.
type Instance struct {
	Name                string   `json:"name"`
	ID                  string   `json:"id"`
	Address             string   `json:"address"`
	Port                *int32   `json:"port"`
	SSLPort             *int32   `json:"sslPort"`
	Payload             *Payload `json:"payload"`
	RegistrationTimeUTC int64    `json:"registrationTimeUTC"`
	ServiceType         string   `json:"serviceType"`
	URISpec             *URISpec `json:"uriSpec"`
}

// Payload is the instance payload, shaped like Spring Cloud's and Dubbo's ZookeeperInstance.
type Payload struct {
	Class    string            `json:"@class"`
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Metadata map[string]string `json:"metadata"`
}

// URISpec is Curator's UriSpec: a template of literal and variable parts.
type URISpec struct {
	Parts []URIPart `json:"parts"`
}

// URIPart is one part of a URISpec.
type URIPart struct {
	Value    string `json:"value"`
	Variable bool   `json:"variable"`
}

// uriSpec is "{scheme}://{address}:{port}", Spring Cloud Zookeeper's default, or, for an
// instance with an sslPort, "{scheme}://{address}:{ssl-port}": Curator's {scheme} is https
// whenever sslPort is set, so the URI must use that port.
func uriSpec(ssl bool) *URISpec {
	port := "port"
	if ssl {
		port = "ssl-port"
	}
	return &URISpec{Parts: []URIPart{{"scheme", true}, {"://", false}, {"address", true}, {":", false}, {port, true}}}
}

// instance encodes ep as a Curator ServiceInstance.
func (s *Store) instance(ep *store.Endpoint) Instance {
	id := ep.Namespace + "." + ep.Pod
	meta := map[string]string{
		MetaOwner: ep.Owner, MetaNamespace: ep.Namespace, MetaPod: ep.Pod, MetaUID: ep.UID,
		MetaNode: ep.Node, MetaZone: ep.Zone, MetaCluster: ep.Cluster,
		MetaRegisteredAt: ep.RegisteredAt.UTC().Format(time.RFC3339Nano),
	}
	for name, port := range ep.Ports {
		meta[MetaPortPrefix+name] = strconv.Itoa(int(port))
	}
	if ep.Weight != 0 {
		meta[MetaWeight] = strconv.Itoa(int(ep.Weight))
	}
	in := Instance{
		Name: ep.Service, ID: id, Address: ep.Address,
		Payload:             &Payload{Class: s.opts.PayloadClass, ID: id, Name: ep.Service, Metadata: meta},
		RegistrationTimeUTC: ep.RegisteredAt.UnixMilli(),
		ServiceType:         "DYNAMIC",
	}
	if name := s.mainPort(ep.Ports); name != "" {
		p := ep.Ports[name]
		in.Port = &p
	}
	if p, ok := ep.Ports["https"]; ok {
		in.SSLPort = &p
	}
	in.URISpec = uriSpec(in.SSLPort != nil)
	return in
}

func (s *Store) mainPort(ports map[string]int32) string {
	if _, ok := ports[s.opts.PortName]; ok && s.opts.PortName != "" {
		return s.opts.PortName
	}
	names := slices.Sorted(maps.Keys(ports))
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// endpoint decodes a znode's data; ok is false when it is not an instance registrar wrote.
func endpoint(data []byte) (store.Endpoint, bool) {
	var in Instance
	if err := json.Unmarshal(data, &in); err != nil || in.Payload == nil || in.Payload.Metadata[MetaOwner] == "" {
		return store.Endpoint{}, false
	}
	meta := in.Payload.Metadata
	ep := store.Endpoint{
		Service: in.Name, Namespace: meta[MetaNamespace], Pod: meta[MetaPod], UID: meta[MetaUID],
		Address: in.Address, Node: meta[MetaNode], Zone: meta[MetaZone], Cluster: meta[MetaCluster],
		Owner: meta[MetaOwner],
	}
	ep.RegisteredAt, _ = time.Parse(time.RFC3339Nano, meta[MetaRegisteredAt])
	if w, err := strconv.ParseInt(meta[MetaWeight], 10, 32); err == nil {
		ep.Weight = int32(w)
	}
	for key, value := range meta {
		name, isPort := strings.CutPrefix(key, MetaPortPrefix)
		if port, err := strconv.ParseInt(value, 10, 32); isPort && err == nil {
			if ep.Ports == nil {
				ep.Ports = map[string]int32{}
			}
			ep.Ports[name] = int32(port)
		}
	}
	return ep, true
}

// call runs fn, a blocking ZooKeeper call, bounded by the Store's Timeout and ctx. The
// client fails every pending call when its connection drops, so fn's goroutine ends soon
// after a timeout too.
func (s *Store) call(ctx context.Context, what string, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
}

// conflict maps the errors of a guard that failed to ErrConflict.
func conflict(err error) error {
	if errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	}
	return err
}
