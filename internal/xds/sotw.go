package xds

// State-of-the-world ADS streams are served here, not by go-control-plane's server. Its
// server and LinearCache do work in proportion to a stream's subscribed names for every
// request (a set of the names, a version comparison and a watch registration per name) and
// for every change (each waiting watch's names compared again, its known versions copied),
// and a gRPC client's ACK repeats all its names. With 100 clients of 100 names at 100
// changes/s that was about a fifth of the operator's CPU in `make bench-xds`
// (docs/xds-performance.md#benchmark-make-bench-xds).
//
// Here a ClusterLoadAssignment costs, per change, one mark per stream subscribed to it (the
// streams are indexed by the names they subscribe to, wildcards apart); an
// ACK that repeats the stream's names costs one comparison of the names; a response holds
// the changed ClusterLoadAssignments only, each marshaled once per change for all streams.
// The protocol is the one go-control-plane serves: one response per type in flight on a
// stream, a request with a stale nonce ignored, a first request (or one naming another
// server's version) answered even when empty, subscriptions (wildcards, "*", an empty
// request) by the rules of clients.Subscription, which the readiness gate's wait reads too
// (the stream's edsSubscription is what the ACK tracker asks). Listeners, RouteConfigurations and Clusters change only when a registry comes or
// goes: they keep a LinearCache watch per request. Delta streams are go-control-plane's.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/registrar-dev/registrar/internal/xds/clients"
)

// edsEntry is one ClusterLoadAssignment as state-of-the-world streams send it.
type edsEntry struct {
	seq uint64 // the publish (EDS cache version) that set it
	res *anypb.Any
}

// sotwEDS holds the ClusterLoadAssignments for state-of-the-world streams and the streams
// that subscribe to them, indexed by what they subscribe to: a publish marks the streams
// that name a changed resource and the wildcard ones, never looks at the others.
type sotwEDS struct {
	mu      sync.RWMutex
	seq     uint64 // the newest publish
	entries map[string]*edsEntry
	// named maps a resource name to the streams whose subscription names it (not wildcard);
	// wildcard holds the streams subscribed to everything. A stream is in neither until its
	// first request.
	named    map[string]map[*edsSubscription]struct{}
	wildcard map[*edsSubscription]struct{}
}

func newSotwEDS() *sotwEDS {
	return &sotwEDS{entries: map[string]*edsEntry{}, named: map[string]map[*edsSubscription]struct{}{},
		wildcard: map[*edsSubscription]struct{}{}}
}

// update stores publish seq (set and deleted names) and marks the changed names on every
// stream subscribed to them. encoded holds, by name, the deterministic encoding of a set
// resource when the caller has it (it is then not marshaled again); the bytes are shared,
// never changed.
func (c *sotwEDS) update(seq uint64, set map[string]types.Resource, encoded map[string][]byte, del []string) error {
	// Marshaled before the lock: the streams' pushes read the entries meanwhile.
	changed := make([]string, 0, len(set)+len(del))
	marshaled := make([]*anypb.Any, 0, len(set))
	var err error
	for name, r := range set {
		a := &anypb.Any{TypeUrl: resourcev3.EndpointType, Value: encoded[name]}
		if a.Value == nil {
			if e := anypb.MarshalFrom(a, r, proto.MarshalOptions{Deterministic: true}); e != nil {
				err = fmt.Errorf("marshal ClusterLoadAssignment %q: %w", name, e)
				continue
			}
		}
		changed = append(changed, name)
		marshaled = append(marshaled, a)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = seq
	for i, a := range marshaled {
		c.entries[changed[i]] = &edsEntry{seq: seq, res: a}
	}
	for _, name := range del {
		delete(c.entries, name)
		changed = append(changed, name)
	}
	for _, name := range changed {
		for sub := range c.named[name] {
			sub.mark(name)
		}
	}
	if len(changed) > 0 {
		for sub := range c.wildcard {
			for _, name := range changed {
				sub.mark(name)
			}
		}
	}
	return err
}

// add makes sub one of the streams c marks; it subscribes to nothing until its first request.
func (c *sotwEDS) add(sub *edsSubscription) {
	sub.owner = c
}

// remove drops a closed stream's subscription from the index.
func (c *sotwEDS) remove(sub *edsSubscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sub.mu.Lock()
	defer sub.mu.Unlock()
	c.unindex(sub, sub.sub)
	sub.sub = clients.Subscription{}
}

// subscribe applies a state-of-the-world request naming names to sub and follows it in the
// index: work in proportion to the names, once per change of subscription (an ACK repeating
// the names does not come here).
func (c *sotwEDS) subscribe(sub *edsSubscription, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sub.mu.Lock()
	defer sub.mu.Unlock()
	old := sub.sub // Sotw never changes the map it had: old keeps its names
	sub.sub.Sotw(names)
	c.unindex(sub, old)
	c.index(sub, sub.sub)
}

// index and unindex add and remove sub's subscription s; c.mu is held.
func (c *sotwEDS) index(sub *edsSubscription, s clients.Subscription) {
	if s.Wildcard {
		c.wildcard[sub] = struct{}{}
		return
	}
	for name := range s.Names {
		subs := c.named[name]
		if subs == nil {
			subs = map[*edsSubscription]struct{}{}
			c.named[name] = subs
		}
		subs[sub] = struct{}{}
	}
}

func (c *sotwEDS) unindex(sub *edsSubscription, s clients.Subscription) {
	if s.Wildcard {
		delete(c.wildcard, sub)
		return
	}
	for name := range s.Names {
		if subs := c.named[name]; subs != nil {
			delete(subs, sub)
			if len(subs) == 0 {
				delete(c.named, name)
			}
		}
	}
}

// edsSubscription is what one stream subscribes to and which of those names changed since
// the stream last looked; the publisher marks, the stream's goroutine takes. Its
// subscription changes through owner (sotwEDS.subscribe), which indexes it.
type edsSubscription struct {
	kick  chan struct{} // capacity 1: "something you subscribe to changed"
	owner *sotwEDS

	mu    sync.Mutex
	sub   clients.Subscription
	dirty map[string]struct{}
}

// mark notes that name, which the stream subscribes to, changed; owner.mu is held.
func (e *edsSubscription) mark(name string) {
	e.mu.Lock()
	if e.dirty == nil {
		e.dirty = map[string]struct{}{}
	}
	e.dirty[name] = struct{}{}
	e.mu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// take returns the changed names and the subscription, and clears the changes.
func (e *edsSubscription) take() (dirty map[string]struct{}, sub clients.Subscription) {
	e.mu.Lock()
	defer e.mu.Unlock()
	dirty, e.dirty = e.dirty, nil
	return dirty, e.sub
}

// request applies a state-of-the-world request naming names.
func (e *edsSubscription) request(names []string) {
	e.owner.subscribe(e, names)
}

// Has tells whether the stream is served the ClusterLoadAssignment name (the readiness
// gate's wait reads it).
func (e *edsSubscription) Has(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sub.Has(name)
}

// adsServer serves ADS: state-of-the-world streams here, delta streams (and the per-type
// services) by go-control-plane's server it embeds.
type adsServer struct {
	serverv3.Server
	s   *Server
	ctx context.Context
	// ids numbers this server's streams -1, -2, ...: go-control-plane's delta streams count
	// up from 1, and both share the ACK tracker.
	ids atomic.Int64
}

// watchedTypes are the types served from a LinearCache watch per request.
var watchedTypes = [...]string{resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ClusterType}

// typeWatch is the LinearCache watch of one type on one stream.
type typeWatch struct {
	cancel func()
	ch     chan cache.Response
	sub    stream.Subscription
	nonce  string // of the response sent from this watch; "" until then
}

// adsStream is one state-of-the-world ADS stream; only its goroutine touches it.
type adsStream struct {
	x      *adsServer
	id     int64
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer
	node   *corev3.Node
	nonce  int64

	watches [len(watchedTypes)]*typeWatch

	eds *edsSubscription // nil until the first EDS request
	// returned maps each ClusterLoadAssignment the client was sent to the publish it held.
	returned  map[string]uint64
	edsNames  []string // the last EDS request's names, as sent
	edsNonce  string   // of the EDS response in flight; "" once it was answered
	edsReq    *discoveryv3.DiscoveryRequest
	edsInFlow bool // a response is in flight: the next waits for its ACK or NACK
}

// StreamAggregatedResources serves one state-of-the-world ADS stream.
func (x *adsServer) StreamAggregatedResources(str discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	st := &adsStream{x: x, id: x.ids.Add(-1), stream: str, node: &corev3.Node{}}
	acks := x.s.acks
	if err := acks.Open(str.Context(), st.id, resourcev3.AnyType); err != nil {
		return err
	}
	defer st.close()

	reqs := make(chan *discoveryv3.DiscoveryRequest)
	go func() {
		defer close(reqs)
		for {
			req, err := str.Recv()
			if err != nil {
				return
			}
			select {
			case reqs <- req:
			case <-str.Context().Done():
				return
			case <-x.ctx.Done():
				return
			}
		}
	}()

	for {
		var kick chan struct{}
		if st.eds != nil && !st.edsInFlow {
			kick = st.eds.kick
		}
		var err error
		select {
		case <-x.ctx.Done():
			return nil
		case req, ok := <-reqs:
			if !ok {
				return nil
			}
			err = st.request(req)
		case res := <-st.watchChan(0):
			err = st.sendWatched(0, res)
		case res := <-st.watchChan(1):
			err = st.sendWatched(1, res)
		case res := <-st.watchChan(2):
			err = st.sendWatched(2, res)
		case <-kick:
			err = st.pushEDS(false, false)
		}
		if err != nil {
			return err
		}
	}
}

func (st *adsStream) close() {
	for _, w := range st.watches {
		if w != nil && w.cancel != nil {
			w.cancel()
		}
	}
	if st.eds != nil {
		st.x.s.sotw.remove(st.eds)
	}
	st.x.s.acks.Closed(st.id, st.node)
}

func (st *adsStream) watchChan(i int) chan cache.Response {
	if w := st.watches[i]; w != nil {
		return w.ch
	}
	return nil
}

func (st *adsStream) nextNonce() string {
	st.nonce++
	return strconv.FormatInt(st.nonce, 10)
}

// request handles one request of the client.
func (st *adsStream) request(req *discoveryv3.DiscoveryRequest) error {
	if req == nil {
		return status.Errorf(codes.Unavailable, "empty request")
	}
	// Only the first request must carry the node.
	if req.GetNode() != nil {
		st.node = req.GetNode()
	} else {
		req.Node = st.node
	}
	typeURL := req.GetTypeUrl()
	if typeURL == "" {
		return status.Errorf(codes.InvalidArgument, "type URL is required for ADS")
	}
	if err := st.x.s.acks.Request(st.id, req); err != nil {
		return err
	}
	if typeURL == resourcev3.EndpointType {
		return st.edsRequest(req)
	}
	i := slices.Index(watchedTypes[:], typeURL)
	if i < 0 {
		return status.Errorf(codes.InvalidArgument, "resource type %s is not served (Listener, RouteConfiguration, Cluster and ClusterLoadAssignment are)", typeURL)
	}
	return st.watchRequest(i, req)
}

// watchRequest opens a LinearCache watch for a request of a Listener, RouteConfiguration or
// Cluster, in place of the stream's previous one.
func (st *adsStream) watchRequest(i int, req *discoveryv3.DiscoveryRequest) error {
	var sub stream.Subscription
	if w := st.watches[i]; w != nil {
		if w.nonce != "" && req.GetResponseNonce() != w.nonce {
			return nil // answers an older response: ignored, as the protocol says
		}
		if w.cancel != nil {
			w.cancel()
		}
		sub = w.sub
		sub.SetResourceSubscription(req.GetResourceNames())
	} else {
		sub = stream.NewSotwSubscription(req.GetResourceNames(), true)
	}
	ch := make(chan cache.Response, 1)
	cancel, err := st.x.s.caches[req.GetTypeUrl()].CreateWatch(req, sub, ch)
	if err != nil {
		return fmt.Errorf("watch %s: %w", req.GetTypeUrl(), err)
	}
	st.watches[i] = &typeWatch{cancel: cancel, ch: ch, sub: sub}
	return nil
}

// sendWatched sends the response a LinearCache watch produced.
func (st *adsStream) sendWatched(i int, res cache.Response) error {
	w := st.watches[i]
	out, err := res.GetDiscoveryResponse()
	if err != nil {
		return fmt.Errorf("build %s response: %w", watchedTypes[i], err)
	}
	out.Nonce = st.nextNonce()
	w.sub.SetReturnedResources(res.GetReturnedResources())
	w.nonce = out.GetNonce()
	w.ch = nil // a watch answers once
	st.x.s.acks.Response(st.stream.Context(), st.id, res.GetRequest(), out)
	return st.stream.Send(out)
}

// edsRequest handles a request of ClusterLoadAssignments.
func (st *adsStream) edsRequest(req *discoveryv3.DiscoveryRequest) error {
	if st.eds == nil {
		st.eds = &edsSubscription{kick: make(chan struct{}, 1)}
		st.returned = map[string]uint64{}
		st.x.s.sotw.add(st.eds)
		st.x.s.acks.ServeEDS(st.id, st.eds)
	} else if st.edsNonce != "" && req.GetResponseNonce() != st.edsNonce {
		return nil // answers an older response: ignored, as the protocol says
	}
	st.edsNonce, st.edsInFlow, st.edsReq = "", false, req
	resubscribed := st.subscribeEDS(req.GetResourceNames())
	// A first request, or one naming a version this server never sent, is answered even
	// with nothing: the client waits for an answer.
	evenIfEmpty := !strings.HasPrefix(req.GetVersionInfo(), st.x.s.prefix)
	return st.pushEDS(resubscribed, evenIfEmpty)
}

// subscribeEDS records the names of an EDS request; it tells whether they differ from the
// previous request's (every ACK of a gRPC client repeats them: one comparison).
func (st *adsStream) subscribeEDS(names []string) bool {
	if st.edsNames != nil && slices.Equal(st.edsNames, names) {
		return false
	}
	st.edsNames = names
	if st.edsNames == nil {
		st.edsNames = []string{}
	}
	st.eds.request(names)
	return true
}

// pushEDS sends the subscribed ClusterLoadAssignments the client does not have: after a
// change of subscription all of them, otherwise those marked changed since the last look.
// Nothing is sent while a response is in flight (the caller checks) or when nothing
// changed, unless evenIfEmpty.
func (st *adsStream) pushEDS(resubscribed, evenIfEmpty bool) error {
	dirty, sub := st.eds.take()
	c := st.x.s.sotw
	type sent struct {
		name string
		seq  uint64
		res  *anypb.Any
	}
	var out []sent
	consider := func(name string, e *edsEntry, ok bool) {
		if !ok {
			delete(st.returned, name) // gone: state of the world does not say so for EDS
			return
		}
		if st.returned[name] != e.seq {
			out = append(out, sent{name, e.seq, e.res})
		}
	}
	c.mu.RLock()
	version := c.seq
	switch {
	case resubscribed && sub.Wildcard:
		for name, e := range c.entries {
			consider(name, e, true)
		}
		for name := range st.returned {
			if _, ok := c.entries[name]; !ok {
				delete(st.returned, name)
			}
		}
	case resubscribed:
		for name := range sub.Names {
			e, ok := c.entries[name]
			consider(name, e, ok)
		}
		for name := range st.returned {
			if !sub.Names[name] {
				delete(st.returned, name)
			}
		}
	default:
		for name := range dirty {
			if sub.Has(name) {
				e, ok := c.entries[name]
				consider(name, e, ok)
			}
		}
	}
	c.mu.RUnlock()
	if len(out) == 0 && !evenIfEmpty {
		return nil
	}
	slices.SortFunc(out, func(a, b sent) int { return strings.Compare(a.name, b.name) })
	resp := &discoveryv3.DiscoveryResponse{
		VersionInfo: st.x.s.prefix + strconv.FormatUint(version, 10),
		TypeUrl:     resourcev3.EndpointType,
		Resources:   make([]*anypb.Any, 0, len(out)),
		Nonce:       st.nextNonce(),
	}
	for _, o := range out {
		resp.Resources = append(resp.Resources, o.res)
		st.returned[o.name] = o.seq
	}
	st.edsNonce, st.edsInFlow = resp.GetNonce(), true
	st.x.s.acks.Response(st.stream.Context(), st.id, st.edsReq, resp)
	return st.stream.Send(resp)
}
