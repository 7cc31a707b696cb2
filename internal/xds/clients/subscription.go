package clients

// Subscription is what one stream subscribes to of one resource type: the one definition
// of "subscribed" of the ADS server. The state-of-the-world server sends a stream the
// ClusterLoadAssignments its subscription has (internal/xds, sotw.go), the readiness gate
// waits for the clients whose subscription has the pod's assignment (Tracker.WaitingFor),
// and the per-client request limit counts a request that asks for more than the stream's
// subscription had (acks.go). Delta streams are served by go-control-plane
// (pkg/server/stream/v3.Subscription); Delta applies a delta request by the same rules, so
// that the gate waits for exactly the delta clients that server serves.
//
// The rules (the xDS protocol's, as go-control-plane implements them):
//   - until a request of the stream names something, a request naming nothing is a wildcard
//     (the legacy form);
//   - "*" is a wildcard (explicit), alongside any names;
//   - state of the world: once a request named something (or "*"), each request replaces
//     the subscription, and one naming nothing subscribes to nothing (a gRPC client that
//     closed its last channel to the resource);
//   - delta: resource_names_subscribe adds, resource_names_unsubscribe removes ("*" ends the
//     explicit wildcard); a legacy wildcard stays one until a request subscribes to
//     something, and then until "*" is unsubscribed.
//
// The zero value is a stream that has sent no request of the type: subscribed to nothing.
type Subscription struct {
	Wildcard bool
	named    bool // a request named something (or "*"): no more legacy wildcard
	Names    map[string]bool
}

// Has tells whether the subscription has the resource name.
func (s *Subscription) Has(name string) bool { return s.Wildcard || s.Names[name] }

// Sotw applies a state-of-the-world request naming names. It never changes the map it had
// (a new request makes a new one), so a copy of the subscription keeps its names.
func (s *Subscription) Sotw(names []string) {
	if !s.named {
		if len(names) == 0 {
			s.Wildcard = true // the legacy wildcard
			return
		}
		s.named = true
	}
	s.Wildcard = false
	s.Names = make(map[string]bool, len(names))
	for _, n := range names {
		if n == explicitWildcard {
			s.Wildcard = true
			continue
		}
		s.Names[n] = true
	}
}

// Delta applies a delta request's subscribe and unsubscribe lists.
func (s *Subscription) Delta(subscribe, unsubscribe []string) {
	if !s.named {
		if len(subscribe) == 0 {
			s.Wildcard = true // the legacy wildcard; unsubscribe is not looked at
			return
		}
		s.named = true // a legacy wildcard before stays one
	}
	if s.Names == nil {
		s.Names = map[string]bool{}
	}
	for _, n := range subscribe {
		if n == explicitWildcard {
			s.Wildcard = true
			continue
		}
		s.Names[n] = true
	}
	for _, n := range unsubscribe {
		if n == explicitWildcard {
			s.Wildcard = false
			continue
		}
		delete(s.Names, n)
	}
}

// AsksForMore tells whether the subscription has a name that prev did not.
func (s *Subscription) AsksForMore(prev *Subscription) bool {
	if prev.Wildcard {
		return false // prev had everything
	}
	if s.Wildcard {
		return true
	}
	for n := range s.Names {
		if !prev.Names[n] {
			return true
		}
	}
	return false
}

// explicitWildcard is the resource name that subscribes to every resource of a type.
const explicitWildcard = "*"
