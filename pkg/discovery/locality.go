package discovery

import "strconv"

// Locality makes Pick prefer nearby instances when several clusters publish one service
// into a shared store (the operator's --store-shared; docs/multicluster.md): the instances
// of the caller's own cluster, then those of its zone, then any. Pick falls over to the next
// tier when every instance of the nearer ones is gone, ejected (ReportFailure) or, in Do,
// behind an open breaker; it comes back as soon as a nearer instance is usable again.
type Locality struct {
	// Cluster is the caller's cluster ID (the operator's --cluster-id there); empty: no
	// cluster preference.
	Cluster string
	// Zone is the caller's zone (its node's topology.kubernetes.io/zone); empty: no zone
	// preference.
	Zone string
	// Order is the preference (default ClusterThenZone).
	Order LocalityOrder
}

// LocalityOrder says which instances a Locality prefers.
type LocalityOrder int

const (
	// ClusterThenZone prefers the caller's cluster, then its zone (in any cluster), then any.
	ClusterThenZone LocalityOrder = iota
	// ZoneOnly prefers the caller's zone, in any cluster, then any.
	ZoneOnly
	// NoPreference picks among every instance alike.
	NoPreference
)

// String is the order's name.
func (o LocalityOrder) String() string {
	switch o {
	case ClusterThenZone:
		return "ClusterThenZone"
	case ZoneOnly:
		return "ZoneOnly"
	case NoPreference:
		return "NoPreference"
	}
	return "LocalityOrder(" + strconv.Itoa(int(o)) + ")"
}

// active reports whether the locality ranks instances at all.
func (l Locality) active() bool {
	switch l.Order {
	case ClusterThenZone:
		return l.Cluster != "" || l.Zone != ""
	case ZoneOnly:
		return l.Zone != ""
	}
	return false
}

// Tier is inst's distance from the caller: 0 nearest. ClusterThenZone: 0 same cluster, 1
// same zone, 2 any; ZoneOnly: 0 same zone, 1 any; NoPreference: 0.
func (l Locality) Tier(inst Instance) int {
	switch l.Order {
	case ClusterThenZone:
		switch {
		case l.Cluster != "" && inst.Cluster == l.Cluster:
			return 0
		case l.Zone != "" && inst.Zone == l.Zone:
			return 1
		}
		return 2
	case ZoneOnly:
		if l.Zone != "" && inst.Zone == l.Zone {
			return 0
		}
		return 1
	}
	return 0
}

// nearest keeps the candidates of the nearest tier present (in place).
func (l Locality) nearest(s *snapshot, cand []int) []int {
	if !l.active() || len(cand) < 2 {
		return cand
	}
	best := 3
	for _, i := range cand {
		best = min(best, l.Tier(s.instances[i]))
	}
	out := cand[:0]
	for _, i := range cand {
		if l.Tier(s.instances[i]) == best {
			out = append(out, i)
		}
	}
	return out
}
