// Package xds serves registrar's decisions over the xDS Aggregated Discovery Service (ADS) to
// Envoy and proxyless gRPC clients. It is a publish.Publisher: the ServiceRegistry reconciler
// hands it the verdict on every selected pod at the end of each reconcile (the same verdicts
// that plan the store's writes) and it maps them to resources:
//
//   - Listener "<service>.<namespace>" (api_listener, HTTP connection manager → RDS over ADS,
//     router filter): what an xds:///<service>.<namespace> target of a gRPC client asks for;
//   - RouteConfiguration "<service>.<namespace>": every request → the cluster of that name;
//   - Cluster "<service>.<namespace>": type EDS over ADS, round robin;
//   - ClusterLoadAssignment "<service>.<namespace>": one locality per zone; Registered pods
//     HEALTHY, a Draining pod DRAINING, every other pod absent.
//
// The resources and the request codec are internal/xds/resource's; what each client
// subscribes to, was sent and acknowledged, and the limits on clients, internal/xds/clients'.
// Each resource type is held in its own go-control-plane LinearCache (delta streams, and the
// Listeners, RouteConfigurations and Clusters of state-of-the-world streams); state-of-the-world
// streams get ClusterLoadAssignments from sotw.go, whose work per change and per ACK does not
// grow with a stream's subscribed names. Either way a change of one registry sends only that
// registry's changed resources (one ClusterLoadAssignment per changed registry), and every
// version carries a prefix unique to the process, so a restarted server never reuses a
// version a client holds.
package xds

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	gcplog "github.com/envoyproxy/go-control-plane/pkg/log"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	ktypes "k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/xds/clients"
	"github.com/registrar-dev/registrar/internal/xds/locality"
	"github.com/registrar-dev/registrar/internal/xds/remote"
	"github.com/registrar-dev/registrar/internal/xds/resource"
)

// TypeURLs are the resource types served, in the order a gRPC client asks for them.
var TypeURLs = resource.TypeURLs

// MetadataNamespace is the filter_metadata key of each endpoint's metadata (pod name, and
// cluster for another cluster's endpoint).
const MetadataNamespace = resource.MetadataNamespace

// RouterFilterName is the HTTP filter name of the router in the published Listener.
const RouterFilterName = resource.RouterFilterName

// ResourceName is the name of every resource published for a registry (resource.ResourceName).
func ResourceName(service, namespace string) string { return resource.ResourceName(service, namespace) }

// StaticResources are the Listener, RouteConfiguration and Cluster the server publishes for
// a resource name (resource.StaticResources).
func StaticResources(name string) (map[string]types.Resource, error) {
	return resource.StaticResources(name)
}

// MaxSubscribedNames bounds the resources one stream subscribes to by name, per type
// (clients.MaxSubscribedNames).
const MaxSubscribedNames = clients.MaxSubscribedNames

// Ack is one client's acknowledgement (or rejection) of one published resource.
type Ack = clients.Ack

// ClientStatus is a connected client as the server sees it.
type ClientStatus = clients.Status

// Published is one ClusterLoadAssignment as it entered the cache, for OnPublished hooks.
type Published struct {
	Name string
	// Seq is the EDS cache version that holds it (the number after the version prefix).
	Seq uint64
	At  time.Time
	// Health maps pod name to its published health (HEALTHY, DRAINING); absent pods are not
	// published.
	Health map[string]string
}

// registryState is what is published for one ServiceRegistry.
type registryState struct {
	uid  ktypes.UID
	name string // resource name
	eps  map[string]resource.Endpoint
	cla  *endpointv3.ClusterLoadAssignment
	// encoded is cla's deterministic encoding (shared with the state-of-the-world entry).
	encoded []byte
	// assign builds cla and encoded, keeping each endpoint's part from one build to the next.
	assign resource.Assignment
	port   string // the port name published
	// duplicates are the endpoints left out of cla (address already published; locality.Build).
	duplicates string
	// healthy maps each HEALTHY pod to the publish that first made it HEALTHY at its
	// current address (the readiness gate may wait for clients to acknowledge it).
	healthy map[string]healthyStamp
}

type healthyStamp struct {
	address string
	port    uint32
	seq     uint64
	at      time.Time
}

// Server is the ADS server and its caches. Create it with New; it is a publish.Publisher
// and a controller-runtime Runnable that needs leader election (see Start).
type Server struct {
	cfg    Config
	log    logr.Logger
	prefix string

	mu     sync.Mutex // serialises publishes: guards regs, owners, seq, seen
	caches map[string]*cache.LinearCache
	sotw   *sotwEDS          // ClusterLoadAssignments for state-of-the-world streams (sotw.go)
	seq    map[string]uint64 // mirror of each cache's version counter
	regs   map[ktypes.NamespacedName]*registryState
	owners map[string]ktypes.NamespacedName
	// seen are the registries published or unpublished before the server listens (waitWarm
	// waits for them); nil once it listens.
	seen    map[ktypes.NamespacedName]bool
	changed chan struct{} // closed and replaced when seen grows
	// remote holds other clusters' records of each resource name (SetRemote), published at
	// priority 1 with the registry of that name.
	remote map[string][]remote.Record

	acks *clients.Tracker

	listening chan struct{}
	addr      string
}

// New builds a server; nothing listens before Start.
func New(cfg Config) *Server {
	if cfg.WarmTimeout == 0 {
		cfg.WarmTimeout = 30 * time.Second
	}
	s := &Server{
		cfg:       cfg,
		log:       cfg.Log,
		prefix:    versionPrefix(),
		caches:    map[string]*cache.LinearCache{},
		sotw:      newSotwEDS(),
		seq:       map[string]uint64{},
		regs:      map[ktypes.NamespacedName]*registryState{},
		owners:    map[string]ktypes.NamespacedName{},
		seen:      map[ktypes.NamespacedName]bool{},
		remote:    map[string][]remote.Record{},
		changed:   make(chan struct{}),
		listening: make(chan struct{}),
	}
	for _, t := range TypeURLs {
		s.caches[t] = cache.NewLinearCache(t, cache.WithVersionPrefix(s.prefix), cache.WithLogger(logAdapter(s.log)))
	}
	s.acks = clients.NewTracker(clients.Config{Prefix: s.prefix, RequestRate: cfg.requestRate(), RequestBurst: cfg.requestBurst(),
		Log: s.log, OnAck: cfg.OnAck})
	return s
}

// versionPrefix is unique per process: start time and 4 random bytes.
func versionPrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x.%s.", time.Now().UnixNano(), hex.EncodeToString(b))
}

// VersionPrefix is this process's version prefix.
func (s *Server) VersionPrefix() string { return s.prefix }

// Publish makes the registry's resources follow the reconcile's verdicts. Only resources
// whose content changed are updated, each type in one cache update.
func (s *Server) Publish(reg publish.Registry) publish.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.markSeen(reg.Key)
	if reg.Hold {
		if st := s.regs[reg.Key]; st != nil && st.uid == reg.UID {
			return published(st.name)
		}
	}
	name := ResourceName(reg.Service, reg.Key.Namespace)
	if err := resource.ValidName(reg.Service, reg.Key.Namespace); err != nil {
		s.unpublishLocked(reg.Key)
		return publish.Result{Reason: v1beta1.ReasonInvalidXDSResourceName, Message: err.Error() + "; it is not served over xDS"}
	}
	if owner, ok := s.owners[name]; ok && owner != reg.Key {
		s.unpublishLocked(reg.Key)
		return publish.Result{Reason: v1beta1.ReasonXDSResourceNameConflict, Message: fmt.Sprintf(
			"xDS resource %q is already served for ServiceRegistry %s; give one of them another spec.serviceName", name, owner.Name)}
	}
	port, ok := resource.PickPort(reg.Ports)
	if !ok {
		s.unpublishLocked(reg.Key)
		return publish.Result{Reason: v1beta1.ReasonNoPorts, Message: "spec.ports is empty: no port to publish over xDS"}
	}
	st := s.regs[reg.Key]
	if st != nil && (st.uid != reg.UID || st.name != name) {
		s.unpublishLocked(reg.Key) // recreated, or its service name changed
		st = nil
	}
	if st == nil {
		st = &registryState{uid: reg.UID, name: name}
		if err := s.addStatic(name); err != nil {
			return publish.Result{Reason: v1beta1.ReasonXDSBuildFailed, Message: err.Error()}
		}
		s.regs[reg.Key] = st
		s.owners[name] = reg.Key
	}
	var eps map[string]resource.Endpoint
	if reg.Hold {
		eps = st.eps
	} else {
		eps = resource.BuildEndpoints(reg, port, st.eps)
	}
	if st.cla != nil && port == st.port && maps.Equal(eps, st.eps) {
		// Nothing this registry publishes changed (other clusters' records refresh it in
		// SetRemote): neither rebuild nor compare the assignment, whose cost grows with the
		// endpoints (a reconcile of a 2,000-pod registry for a pod not ready yet).
		return published(name)
	}
	st.eps, st.port = eps, port
	if s.refreshLocked(st) {
		st.stampHealthy(s.seq[resourcev3.EndpointType])
	}
	return published(name)
}

// refreshLocked rebuilds the registry's ClusterLoadAssignment from its endpoints and the
// other clusters' records of its name, and pushes it when it changed (reported).
func (s *Server) refreshLocked(st *registryState) bool {
	var others []locality.Endpoint
	for _, r := range s.remote[st.name] {
		if e, ok := locality.FromRecord(r.Cluster, r.Endpoint, st.port); ok {
			others = append(others, e)
		}
	}
	// Built with its deterministic encoding, which the state-of-the-world streams are sent,
	// and compared by it: cheaper than proto.Equal of two assignments, and as exact. Only the
	// endpoints that changed since the last build are built and encoded again
	// (resource.Assignment; BenchmarkPublishOneChangeOf2000).
	cla, encoded, dups, err := st.assign.Build(st.name, st.eps, others)
	if d := strings.Join(dups, ","); d != st.duplicates {
		st.duplicates = d
		if d != "" {
			s.log.Info("endpoints left out of the xDS assignment: their address is already published (gRPC rejects an assignment that repeats one)",
				"name", st.name, "endpoints", dups)
		}
	}
	if err != nil {
		s.log.Error(err, "encode ClusterLoadAssignment", "name", st.name)
		encoded = nil // pushed all the same, marshaled again where it is sent
	} else if st.encoded != nil && bytes.Equal(st.encoded, encoded) {
		return false
	}
	st.cla, st.encoded = cla, encoded
	// The delta streams' cache gets the assignment as its encoding (resource.Opaque), so that
	// it is not marshaled again there: the same bytes on the wire.
	s.update(resourcev3.EndpointType, map[string]types.Resource{st.name: resource.Opaque(cla, encoded)},
		map[string][]byte{st.name: encoded}, nil, st.eps)
	return true
}

// SetRemote replaces the records other clusters published for service in namespace (a
// shared store, internal/xds/remote): they are served at priority 1 with this cluster's
// registry of that name, whose ClusterLoadAssignment is pushed once if it changed. A name
// with no registry in this cluster is not served; its records wait for one.
func (s *Server) SetRemote(service, namespace string, recs []remote.Record) {
	name := ResourceName(service, namespace)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(recs) == 0 {
		delete(s.remote, name)
	} else {
		s.remote[name] = recs
	}
	key, ok := s.owners[name]
	if !ok {
		return
	}
	if st := s.regs[key]; st != nil && st.cla != nil {
		s.refreshLocked(st)
	}
}

// stampHealthy records, for each pod HEALTHY in the publish seq, the publish that first made
// it HEALTHY at its address; pods no longer HEALTHY are dropped.
func (st *registryState) stampHealthy(seq uint64) {
	next := make(map[string]healthyStamp, len(st.eps))
	var now time.Time
	for pod, e := range st.eps {
		if e.Health != corev3.HealthStatus_HEALTHY {
			continue
		}
		if h, ok := st.healthy[pod]; ok && h.address == e.Address && h.port == e.Port {
			next[pod] = h
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		next[pod] = healthyStamp{address: e.Address, port: e.Port, seq: seq, at: now}
	}
	st.healthy = next
}

// Acknowledged reports whether every connected client subscribed to the registry's
// ClusterLoadAssignment has acknowledged a version that holds pod HEALTHY, and how many
// have not. It is true at once for a registry or a pod that is not served over xDS (no
// client can be waiting for it), and true once timeout has passed since the pod was first
// published HEALTHY, so that a dead or stuck client never holds a gate for longer.
func (s *Server) Acknowledged(key ktypes.NamespacedName, pod string, timeout time.Duration) (bool, int) {
	s.mu.Lock()
	st := s.regs[key]
	var h healthyStamp
	var ok bool
	var name string
	if st != nil {
		h, ok = st.healthy[pod]
		name = st.name
	}
	s.mu.Unlock()
	if !ok {
		return true, 0
	}
	n := s.acks.WaitingFor(name, h.seq)
	if n == 0 {
		return true, 0
	}
	if time.Since(h.at) >= timeout {
		gateAckTimeouts.Inc()
		return true, n
	}
	return false, n
}

func published(name string) publish.Result {
	return publish.Result{Message: fmt.Sprintf("served over xDS as %q (Listener, RouteConfiguration, Cluster and ClusterLoadAssignment); gRPC clients dial xds:///%s", name, name)}
}

// addStatic publishes the Listener, RouteConfiguration and Cluster of a name (they depend
// on the name only).
func (s *Server) addStatic(name string) error {
	res, err := resource.StaticResources(name)
	if err != nil {
		return err
	}
	for _, t := range []string{resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ClusterType} {
		s.update(t, map[string]types.Resource{name: res[t]}, nil, nil, nil)
	}
	return nil
}

// update writes one change into the cache of typeURL, stamping it first so that the ACK of
// any response holding it is attributed to this publish.
func (s *Server) update(typeURL string, set map[string]types.Resource, encoded map[string][]byte, del []string, eps map[string]resource.Endpoint) {
	s.seq[typeURL]++
	seq := s.seq[typeURL]
	now := time.Now()
	for name := range set {
		s.acks.Stamp(typeURL, name, seq, now)
	}
	for _, name := range del {
		s.acks.Forget(typeURL, name) // no response holds it any more
	}
	if typeURL == resourcev3.EndpointType && s.cfg.OnPublished != nil {
		for name := range set {
			health := make(map[string]string, len(eps))
			for pod, e := range eps {
				health[pod] = e.Health.String()
			}
			s.cfg.OnPublished(Published{Name: name, Seq: seq, At: now, Health: health})
		}
	}
	if typeURL == resourcev3.EndpointType {
		if err := s.sotw.update(seq, set, encoded, del); err != nil {
			s.log.Error(err, "xDS cache update failed", "type", typeURL)
		}
	}
	if err := s.caches[typeURL].UpdateResources(set, del); err != nil {
		s.log.Error(err, "xDS cache update failed", "type", typeURL)
	}
	publishes.WithLabelValues(resource.ShortType(typeURL)).Inc()
}

// Unpublish removes everything published for the registry.
func (s *Server) Unpublish(key ktypes.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unpublishLocked(key)
	s.markSeen(key)
}

func (s *Server) unpublishLocked(key ktypes.NamespacedName) {
	st := s.regs[key]
	if st == nil {
		return
	}
	delete(s.regs, key)
	if s.owners[st.name] == key {
		delete(s.owners, st.name)
	}
	s.acks.ForgetPushLags(st.name)
	for _, t := range TypeURLs {
		s.update(t, nil, nil, []string{st.name}, nil)
	}
}

func (s *Server) markSeen(key ktypes.NamespacedName) {
	if s.seen == nil || s.seen[key] {
		return // warm already, or seen
	}
	s.seen[key] = true
	close(s.changed)
	s.changed = make(chan struct{})
}

// LoadAssignment returns the ClusterLoadAssignment published under name, or nil.
func (s *Server) LoadAssignment(name string) *endpointv3.ClusterLoadAssignment {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, ok := s.owners[name]
	if !ok {
		return nil
	}
	if st := s.regs[key]; st != nil {
		return st.cla
	}
	return nil
}

// logAdapter routes go-control-plane's logs to logr: debug at V(2), info at V(1), warnings
// and errors at the default level. A line is formatted only when the logger writes it:
// LinearCache logs the subscribed names and known versions of every watch it opens while it
// holds the cache's lock, so formatting them at the default level would slow every push.
func logAdapter(l logr.Logger) gcplog.Logger {
	debug, info := l.V(2), l.V(1)
	return gcplog.LoggerFuncs{
		DebugFunc: func(f string, a ...any) {
			if debug.Enabled() {
				debug.Info(fmt.Sprintf(f, a...))
			}
		},
		InfoFunc: func(f string, a ...any) {
			if info.Enabled() {
				info.Info(fmt.Sprintf(f, a...))
			}
		},
		WarnFunc:  func(f string, a ...any) { l.Info(fmt.Sprintf(f, a...)) },
		ErrorFunc: func(f string, a ...any) { l.Error(nil, fmt.Sprintf(f, a...)) },
	}
}

// Clients lists the connected clients.
func (s *Server) Clients() []ClientStatus { return s.acks.Statuses() }

// PushLag is the slowest of the registry's last 128 measured pushes of its
// ClusterLoadAssignment (a change entering the cache → a client's ACK of it); 0 when it is
// not published or no client acknowledged a change yet. It feeds the drain advice.
func (s *Server) PushLag(key ktypes.NamespacedName) time.Duration {
	s.mu.Lock()
	st := s.regs[key]
	s.mu.Unlock()
	if st == nil {
		return 0
	}
	return s.acks.PushLag(st.name)
}

var (
	_ publish.Publisher   = (*Server)(nil)
	_ publish.LagReporter = (*Server)(nil)
	_ publish.AckWaiter   = (*Server)(nil)
)

// waitWarm blocks until every registry Expected lists was published or unpublished, or
// WarmTimeout passed, so that a fresh server never answers from a partial view (a gRPC
// client treats a Listener missing from an LDS answer as deleted).
func (s *Server) waitWarm(ctx context.Context) {
	deadline := time.NewTimer(s.cfg.WarmTimeout)
	defer deadline.Stop()
	if !s.waitRegistries(ctx, deadline.C) || s.cfg.RemoteSynced == nil {
		return
	}
	select {
	case <-s.cfg.RemoteSynced:
	case <-ctx.Done():
	case <-deadline.C:
		s.log.Info("serving xDS before the other clusters' records were listed", "waited", s.cfg.WarmTimeout)
	}
}

// waitRegistries is waitWarm's wait for the registries Expected lists; false when ctx ended
// or the deadline passed.
func (s *Server) waitRegistries(ctx context.Context, deadline <-chan time.Time) bool {
	if s.cfg.Expected == nil {
		return true
	}
	var want []ktypes.NamespacedName
	for {
		var err error
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		want, err = s.cfg.Expected(lctx)
		cancel()
		if err == nil {
			break
		}
		s.log.Error(err, "cannot list ServiceRegistries before serving xDS; retrying")
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		case <-time.After(time.Second):
		}
	}
	for {
		s.mu.Lock()
		missing := 0
		for _, k := range want {
			if !s.seen[k] {
				missing++
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if missing == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			s.log.Info("serving xDS before every ServiceRegistry was reconciled", "waited", s.cfg.WarmTimeout, "missing", missing)
			return false
		case <-ch:
		}
	}
}
