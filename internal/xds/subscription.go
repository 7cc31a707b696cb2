package xds

// subscription is what one stream subscribes to of one resource type: the one definition
// of "subscribed" in this package. The state-of-the-world server sends a stream the
// ClusterLoadAssignments its subscription has (sotw.go), the readiness gate waits for the
// clients whose subscription has the pod's assignment (acks.go, waitingFor), and the
// per-client request limit counts a request that asks for more than the stream's
// subscription had (acks.go). Delta streams are served by go-control-plane
// (pkg/server/stream/v3.Subscription); delta applies a delta request by the same rules, so
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
type subscription struct {
	wildcard bool
	named    bool // a request named something (or "*"): no more legacy wildcard
	names    map[string]bool
}

// has tells whether the subscription has the resource name.
func (s *subscription) has(name string) bool { return s.wildcard || s.names[name] }

// sotw applies a state-of-the-world request naming names. It never changes the map it had
// (a new request makes a new one), so a copy of the subscription keeps its names.
func (s *subscription) sotw(names []string) {
	if !s.named {
		if len(names) == 0 {
			s.wildcard = true // the legacy wildcard
			return
		}
		s.named = true
	}
	s.wildcard = false
	s.names = make(map[string]bool, len(names))
	for _, n := range names {
		if n == explicitWildcard {
			s.wildcard = true
			continue
		}
		s.names[n] = true
	}
}

// delta applies a delta request's subscribe and unsubscribe lists.
func (s *subscription) delta(subscribe, unsubscribe []string) {
	if !s.named {
		if len(subscribe) == 0 {
			s.wildcard = true // the legacy wildcard; unsubscribe is not looked at
			return
		}
		s.named = true // a legacy wildcard before stays one
	}
	if s.names == nil {
		s.names = map[string]bool{}
	}
	for _, n := range subscribe {
		if n == explicitWildcard {
			s.wildcard = true
			continue
		}
		s.names[n] = true
	}
	for _, n := range unsubscribe {
		if n == explicitWildcard {
			s.wildcard = false
			continue
		}
		delete(s.names, n)
	}
}

// asksForMore tells whether the subscription has a name that prev did not.
func (s *subscription) asksForMore(prev *subscription) bool {
	if prev.wildcard {
		return false // prev had everything
	}
	if s.wildcard {
		return true
	}
	for n := range s.names {
		if !prev.names[n] {
			return true
		}
	}
	return false
}

// explicitWildcard is the resource name that subscribes to every resource of a type.
const explicitWildcard = "*"
