package clients

import (
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/registrar-dev/registrar/internal/xds/resource"
)

// Delta (incremental) xDS streams are followed like state-of-the-world ones: each response's
// resources are stamped with the publish they hold (its system_version_info is the cache
// version), and the request that answers its nonce is the ACK, or the NACK with
// error_detail. Subscriptions are incremental (subscribe / unsubscribe lists), by the rules
// of Subscription.

// DeltaResponse records what a delta response on stream id holds, before it is sent (a
// go-control-plane StreamDeltaResponseFunc).
func (a *Tracker) DeltaResponse(id int64, _ *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
	typ := resource.ShortType(resp.GetTypeUrl())
	responses.WithLabelValues(typ).Inc()
	responseBytes.WithLabelValues(typ).Observe(float64(proto.Size(resp)))
	seq, ok := a.parseSeq(resp.GetSystemVersionInfo())
	st := a.stream(id)
	if st == nil {
		return
	}
	sent := sentResponse{nonce: resp.GetNonce(), version: resp.GetSystemVersionInfo()}
	if ok {
		a.histMu.RLock()
		for _, r := range resp.GetResources() {
			if s, found := a.stampOf(resp.GetTypeUrl(), r.GetName(), seq); found {
				sent.items = append(sent.items, item{name: r.GetName(), stamp: s})
			}
		}
		a.histMu.RUnlock()
	}
	st.mu.Lock()
	st.pending[resp.GetTypeUrl()] = sent
	st.mu.Unlock()
}

// DeltaRequest updates the stream's subscriptions (closing a stream that subscribes to more
// than MaxSubscribedNames names of a type) and hands an ACK or NACK to the same accounting
// as a state-of-the-world one (a go-control-plane StreamDeltaRequestFunc).
func (a *Tracker) DeltaRequest(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
	newNames := len(req.GetResourceNamesSubscribe()) > 0
	st := a.stream(id)
	if st != nil {
		st.mu.Lock()
		sub := st.subs[req.GetTypeUrl()]
		if sub == nil {
			sub = &Subscription{}
			st.subs[req.GetTypeUrl()] = sub
		}
		sub.Delta(req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe())
		if n := len(sub.Names); n > MaxSubscribedNames {
			node := st.node
			if node == "" { // its first request
				node = req.GetNode().GetId()
			}
			st.mu.Unlock()
			return a.tooManyNames(node, n)
		}
		if req.GetTypeUrl() == resourcev3.EndpointType {
			st.eds = sub
		}
		st.mu.Unlock()
	}
	return a.answer(st, req.GetNode().GetId(), req.GetTypeUrl(), req.GetResponseNonce(), "",
		req.GetErrorDetail() != nil, req.GetErrorDetail().GetMessage(), newNames, time.Now())
}
