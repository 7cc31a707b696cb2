package clients

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/registrar-dev/registrar/internal/xds/resource"
)

// Ack is one client's acknowledgement (or rejection) of one published resource.
type Ack struct {
	Node    string
	TypeURL string
	Name    string
	// Seq is the cache version at which the acknowledged content of Name was published.
	Seq uint64
	// PublishedAt is when that content entered the cache; At when the client answered.
	PublishedAt, At time.Time
	// Nack carries the client's error message when it rejected the response.
	Nack string
}

// stamp is one publish of one resource: the cache version and when.
type stamp struct {
	seq uint64
	at  time.Time
}

// historyLen bounds the stamps kept per resource (a response holds the newest content, so
// only stamps newer than the oldest unacknowledged response matter).
const historyLen = 16

// sentResponse is the last response of one type on one stream, awaiting its ACK or NACK.
type sentResponse struct {
	nonce   string
	version string
	items   []item
}

type item struct {
	name string
	stamp
}

// clientState is one ADS stream; mu guards it.
type clientState struct {
	mu      sync.Mutex
	node    string
	pending map[string]sentResponse
	acked   map[string]string // type URL → version last acknowledged
	nacks   int
	limiter *rate.Limiter
	// subs is, per type URL, what the stream's requests subscribed to, so that a request for
	// names it did not ask for before counts against the limiter, and one that subscribes to
	// too many is refused (MaxSubscribedNames).
	subs map[string]*Subscription
	// lastNames is, per type URL, the names of the stream's last state-of-the-world request
	// as it sent them: an ACK that repeats them (every ACK of a gRPC client does) costs no
	// new set.
	lastNames map[string][]string
	// eds is the stream's subscription to ClusterLoadAssignments as the server serves it
	// (nil before its first EDS request): a state-of-the-world stream's (ServeEDS), a delta
	// stream's subs entry. edsAcked maps each ClusterLoadAssignment to the
	// publish (cache version) of the content the client last acknowledged. Both feed the
	// readiness gate's wait for ACKs (WaitingFor).
	eds      interface{ Has(name string) bool }
	edsAcked map[string]uint64
}

// Status is a connected client as the server sees it.
type Status struct {
	Node string
	// Acked maps type URL to the version the client last acknowledged.
	Acked map[string]string
	Nacks int
}

// Config configures a Tracker.
type Config struct {
	// Prefix is the server's version prefix: a version that has it names a publish (the
	// cache version after it).
	Prefix string
	// RequestRate and RequestBurst limit the requests of one stream that cost the server a
	// new watch (answer).
	RequestRate  float64
	RequestBurst int
	Log          logr.Logger
	// OnAck, when set, is called for every resource of every acknowledged or rejected
	// response. It must not block.
	OnAck func(Ack)
}

// Tracker follows the responses sent on every stream and the ACK or NACK that answers
// each: it exports registrar_xds_push_seconds (publish → ACK, per client) and NACK counts,
// keeps the push lags of each ClusterLoadAssignment (PushLag) and tells the readiness gate
// which clients have not acknowledged a publish yet (WaitingFor). The server stamps each
// publish (Stamp) and drops what is unpublished (Forget); the streams report what they
// send and receive (Open, Request, Response, the Delta ones, Closed).
//
// Locking: histMu guards the publish history, streamsMu the set of streams, and each
// stream's own lock its state, so that one stream's requests and responses never wait for
// another's (only a publish's Stamp, briefly, for all). The one nesting is a stream's lock,
// then histMu (an ACK checks the history); nothing waits for a stream's lock while it holds
// histMu or streamsMu.
type Tracker struct {
	cfg       Config
	lags      pushLags
	histMu    sync.RWMutex
	history   map[string]map[string][]stamp // type URL → published name → stamps, oldest first (Forget)
	streamsMu sync.RWMutex
	streams   map[int64]*clientState
}

// NewTracker returns a tracker with no stream.
func NewTracker(cfg Config) *Tracker {
	return &Tracker{cfg: cfg, history: map[string]map[string][]stamp{}, streams: map[int64]*clientState{}}
}

// Stamp records publish seq of the resource name of typeURL, at at: the ACK of any response
// holding it is attributed to it.
func (a *Tracker) Stamp(typeURL, name string, seq uint64, at time.Time) {
	a.histMu.Lock()
	defer a.histMu.Unlock()
	byName := a.history[typeURL]
	if byName == nil {
		byName = map[string][]stamp{}
		a.history[typeURL] = byName
	}
	h := append(byName[name], stamp{seq, at})
	if len(h) > historyLen {
		h = h[len(h)-historyLen:]
	}
	byName[name] = h
}

// Forget drops what is kept of a resource that is no longer published: its publish history
// and every stream's acknowledged version of it. So the history holds the published
// resources only (at most historyLen stamps each), and a stream's ACKs the published
// ClusterLoadAssignments it acknowledged.
func (a *Tracker) Forget(typeURL, name string) {
	a.histMu.Lock()
	delete(a.history[typeURL], name)
	a.histMu.Unlock()
	if typeURL != resourcev3.EndpointType {
		return
	}
	// An ACK that checked the history before the deletion recorded its version under the
	// stream's lock, before this takes it: it is deleted here too.
	for _, st := range a.allStreams() {
		st.mu.Lock()
		delete(st.edsAcked, name)
		st.mu.Unlock()
	}
}

// stream is stream id's state; nil when it is not followed (closed, or never opened).
func (a *Tracker) stream(id int64) *clientState {
	a.streamsMu.RLock()
	defer a.streamsMu.RUnlock()
	return a.streams[id]
}

// allStreams lists the streams followed now, to be looked at one by one without holding
// streamsMu.
func (a *Tracker) allStreams() []*clientState {
	a.streamsMu.RLock()
	defer a.streamsMu.RUnlock()
	out := make([]*clientState, 0, len(a.streams))
	for _, st := range a.streams {
		out = append(out, st)
	}
	return out
}

// Stamped counts the resources of typeURL with a publish history (stamped, not forgotten
// since): it follows what the server publishes, whatever came and went.
func (a *Tracker) Stamped(typeURL string) int {
	a.histMu.RLock()
	defer a.histMu.RUnlock()
	return len(a.history[typeURL])
}

// stampOf is the publish of name that a response at cache version seq holds: the newest at
// or below seq (a response is built from the cache at its version). histMu is held.
func (a *Tracker) stampOf(typeURL, name string, seq uint64) (stamp, bool) {
	h := a.history[typeURL][name]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].seq <= seq {
			return h[i], true
		}
	}
	return stamp{}, false
}

// Open starts following stream id (a go-control-plane StreamOpenFunc).
func (a *Tracker) Open(_ context.Context, id int64, _ string) error {
	a.streamsMu.Lock()
	defer a.streamsMu.Unlock()
	a.streams[id] = &clientState{pending: map[string]sentResponse{}, acked: map[string]string{}, subs: map[string]*Subscription{},
		lastNames: map[string][]string{},
		limiter:   rate.NewLimiter(rate.Limit(a.cfg.RequestRate), a.cfg.RequestBurst)}
	clients.Set(float64(len(a.streams)))
	return nil
}

// Closed forgets stream id (a go-control-plane StreamClosedFunc).
func (a *Tracker) Closed(id int64, _ *corev3.Node) {
	a.streamsMu.Lock()
	defer a.streamsMu.Unlock()
	delete(a.streams, id)
	clients.Set(float64(len(a.streams)))
}

// Response records what a response on stream id holds, before it is sent.
func (a *Tracker) Response(_ context.Context, id int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
	typ := resource.ShortType(resp.GetTypeUrl())
	responses.WithLabelValues(typ).Inc()
	responseBytes.WithLabelValues(typ).Observe(float64(proto.Size(resp)))
	seq, ok := a.parseSeq(resp.GetVersionInfo())
	st := a.stream(id)
	if st == nil {
		return
	}
	sent := sentResponse{nonce: resp.GetNonce(), version: resp.GetVersionInfo()}
	if ok {
		names := resourceNames(resp)
		a.histMu.RLock()
		for _, n := range names {
			if s, found := a.stampOf(resp.GetTypeUrl(), n, seq); found {
				sent.items = append(sent.items, item{name: n, stamp: s})
			}
		}
		a.histMu.RUnlock()
	}
	st.mu.Lock()
	st.pending[resp.GetTypeUrl()] = sent
	st.mu.Unlock()
}

// Request handles a client's state-of-the-world request on stream id: the first one names the node; one that answers the
// pending response's nonce is its ACK, or its NACK when it carries error_detail. A stream
// sending requests faster than the per-client limit is closed.
func (a *Tracker) Request(id int64, req *discoveryv3.DiscoveryRequest) error {
	st := a.stream(id)
	if st == nil {
		return nil
	}
	if n := len(req.GetResourceNames()); n > MaxSubscribedNames {
		return a.tooManyNames(req.GetNode().GetId(), n)
	}
	st.mu.Lock()
	newNames := st.subscribe(req.GetTypeUrl(), req.GetResourceNames())
	if sent, ok := st.pending[req.GetTypeUrl()]; ok && req.GetErrorDetail() != nil && req.GetResponseNonce() == sent.nonce &&
		!strings.HasPrefix(req.GetVersionInfo(), a.cfg.Prefix) {
		// A client that rejects its first response from this server asks with no (or
		// another server's) version, which would make the cache send the same content
		// again at once, and again on every NACK: an error storm. Answer as if it held
		// the rejected version, so it gets the next change instead.
		req.VersionInfo = sent.version
	}
	st.mu.Unlock()
	return a.answer(st, req.GetNode().GetId(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetVersionInfo(),
		req.GetErrorDetail() != nil, req.GetErrorDetail().GetMessage(), newNames, time.Now())
}

// subscribe records a state-of-the-world request of typeURL naming names (Subscription)
// and tells whether it asks for something the stream's subscription of that type did not
// have (or is its first request of the type). The same names in the same order as the
// previous request are the common case (an ACK) and cost a comparison, not a new set.
func (st *clientState) subscribe(typeURL string, names []string) (newNames bool) {
	if last, seen := st.lastNames[typeURL]; seen && slices.Equal(last, names) {
		return false
	}
	sub, seen := st.subs[typeURL]
	if !seen {
		sub = &Subscription{}
		st.subs[typeURL] = sub
	}
	prev := *sub // Sotw replaces the names' map: prev keeps its own
	sub.Sotw(names)
	st.lastNames[typeURL] = names
	return !seen || sub.AsksForMore(&prev)
}

// tooManyNames closes a stream that subscribes to more than MaxSubscribedNames names of a
// type (n).
func (a *Tracker) tooManyNames(node string, n int) error {
	streamsRefused.Inc()
	a.cfg.Log.Info("closing an xDS stream that subscribes to more names than the server accepts", "node", node, "names", n,
		"max", MaxSubscribedNames)
	return status.Errorf(codes.ResourceExhausted, "%d resource names subscribed, more than %d (ask for \"*\" to get every one)",
		n, MaxSubscribedNames)
}

// ServeEDS makes sub the EDS subscription of state-of-the-world stream id (at its first
// EDS request), as the server serves it: the readiness gate waits for the stream when sub
// has the name.
func (a *Tracker) ServeEDS(id int64, sub interface{ Has(name string) bool }) {
	if st := a.stream(id); st != nil {
		st.mu.Lock()
		st.eds = sub
		st.mu.Unlock()
	}
}

// answer handles a request of either protocol on stream st: the first one names the node; one that
// answers the pending response's nonce is its ACK, or its NACK when it carries an error
// (detail). keeps is the version the request names (empty for delta requests); newNames
// tells that it asks for names the stream did not ask for before.
//
// The per-client limit counts the requests that cost the server a new watch of its own
// making: every request that does not answer the pending response (a first request, a
// stale or repeated nonce) and every request for new names. The ACK or NACK of a response
// does not count: the server decided to send that response, and a client that acknowledges
// each push at once must not throttle its own next push. A stream beyond the limit is
// closed.
func (a *Tracker) answer(st *clientState, node, typeURL, nonce, keeps string, isNack bool, nackMsg string, newNames bool, now time.Time) error {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	if node != "" {
		st.node = node
	}
	sent, ok := st.pending[typeURL]
	answers := ok && nonce != "" && nonce == sent.nonce
	if (!answers || newNames) && !st.limiter.Allow() {
		st.mu.Unlock()
		rateLimited.Inc()
		a.cfg.Log.Info("closing an xDS stream that sends requests faster than the per-client limit", "node", st.node)
		return status.Errorf(codes.ResourceExhausted, "more than %v xDS requests per second", a.cfg.RequestRate)
	}
	if !answers {
		st.mu.Unlock()
		return nil
	}
	delete(st.pending, typeURL)
	node = st.node
	if isNack {
		st.nacks++
	} else {
		st.acked[typeURL] = keeps
		if keeps == "" {
			st.acked[typeURL] = sent.version
		}
		if typeURL == resourcev3.EndpointType {
			if st.edsAcked == nil {
				st.edsAcked = map[string]uint64{}
			}
			a.histMu.RLock()
			for _, it := range sent.items {
				if _, published := a.history[typeURL][it.name]; published { // not deleted since
					st.edsAcked[it.name] = max(st.edsAcked[it.name], it.seq)
				}
			}
			a.histMu.RUnlock()
		}
	}
	acks := make([]Ack, 0, len(sent.items))
	for _, it := range sent.items {
		ack := Ack{Node: node, TypeURL: typeURL, Name: it.name, Seq: it.seq, PublishedAt: it.at, At: now}
		if isNack {
			ack.Nack = nackMsg
		}
		acks = append(acks, ack)
	}
	st.mu.Unlock()

	typ := resource.ShortType(typeURL)
	if isNack {
		nacks.WithLabelValues(typ).Inc()
		a.cfg.Log.Info("xDS client rejected a response (NACK); it keeps the version it had",
			"node", node, "type", typeURL, "keeps", keeps, "nonce", nonce, "error", nackMsg)
	}
	for _, ack := range acks {
		if !isNack {
			pushSeconds.WithLabelValues(typ).Observe(ack.At.Sub(ack.PublishedAt).Seconds())
			if ack.TypeURL == resourcev3.EndpointType {
				a.lags.add(ack.Name, ack.At.Sub(ack.PublishedAt))
			}
		}
		if a.cfg.OnAck != nil {
			a.cfg.OnAck(ack)
		}
	}
	return nil
}

// Statuses lists the connected clients.
func (a *Tracker) Statuses() []Status {
	streams := a.allStreams()
	out := make([]Status, 0, len(streams))
	for _, st := range streams {
		st.mu.Lock()
		acked := make(map[string]string, len(st.acked))
		for k, v := range st.acked {
			acked[k] = v
		}
		out = append(out, Status{Node: st.node, Acked: acked, Nacks: st.nacks})
		st.mu.Unlock()
	}
	return out
}

// resourceNames reads the names of the resources in a response without decoding them:
// field 1 of Listener, RouteConfiguration and Cluster is the name, and of
// ClusterLoadAssignment the cluster_name.
func resourceNames(resp *discoveryv3.DiscoveryResponse) []string {
	names := make([]string, 0, len(resp.GetResources()))
	for _, any := range resp.GetResources() {
		if name, ok := field1(any.GetValue()); ok {
			names = append(names, name)
		}
	}
	return names
}

func field1(b []byte) (string, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", false
			}
			return string(v), true
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
	}
	return "", false
}

// WaitingFor counts the clients subscribed to the ClusterLoadAssignment name that have not
// acknowledged its content of publish seq or later.
func (a *Tracker) WaitingFor(name string, seq uint64) int {
	n := 0
	for _, st := range a.allStreams() {
		st.mu.Lock()
		if st.eds != nil && st.eds.Has(name) && st.edsAcked[name] < seq {
			n++
		}
		st.mu.Unlock()
	}
	return n
}

// parseSeq reads the cache version number out of a response's version_info.
func (a *Tracker) parseSeq(version string) (uint64, bool) {
	if !strings.HasPrefix(version, a.cfg.Prefix) {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(version, a.cfg.Prefix), 10, 64)
	return n, err == nil
}
