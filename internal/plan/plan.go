// Package plan computes the writes that make one scope of the store equal to the desired
// endpoints, in the manner of external-dns: desired vs current in, a minimal set of changes
// out, and only records the owner wrote are ever updated or deleted. It is pure.
package plan

import (
	"maps"
	"slices"
	"time"

	"github.com/registrar-dev/registrar/internal/store"
)

// Plan is the outcome of Compute.
type Plan struct {
	// Changes are the writes to apply; empty when the store already matches.
	Changes store.Changes
	// Conflicts are pods whose key is held by another owner; they are left alone.
	Conflicts []string
}

// Compute returns the changes that make the records of owner in current equal to desired.
// desired and current are keyed by pod name. A desired endpoint whose key another owner
// holds is reported as a conflict and not written; a current record of another owner is
// never deleted. An update keeps the record's registeredAt unless the pod's UID changed;
// creates and recreated pods get now.
func Compute(owner string, desired map[string]store.Endpoint, current map[string]store.Record, now time.Time) Plan {
	return ComputeWeighted(owner, desired, current, now, nil)
}

// Weigher is the weight of an endpoint registered at registeredAt (slow start, see
// internal/slowstart), 1 to store.FullWeight.
type Weigher func(registeredAt time.Time) int32

// ComputeWeighted is Compute for a registry with slow start: each desired endpoint's weight
// is weigh(its registeredAt) (now for a new or recreated pod, else the stored one), and a
// record whose weight differs is updated. With a nil weigh the desired weights are kept
// as they are (0: no weight written).
func ComputeWeighted(owner string, desired map[string]store.Endpoint, current map[string]store.Record, now time.Time, weigh Weigher) Plan {
	var p Plan
	for _, pod := range slices.Sorted(maps.Keys(desired)) {
		want := desired[pod]
		have, exists := current[pod]
		want.RegisteredAt = now
		if exists && have.UID == want.UID {
			want.RegisteredAt = have.RegisteredAt
		}
		if weigh != nil {
			want.Weight = weigh(want.RegisteredAt)
		}
		switch {
		case !exists:
			p.Changes.Create = append(p.Changes.Create, want)
		case have.Owner != owner:
			p.Conflicts = append(p.Conflicts, pod)
		case !Same(have.Endpoint, want):
			p.Changes.Update = append(p.Changes.Update, store.Update{Old: have, New: want})
		}
	}
	for _, pod := range slices.Sorted(maps.Keys(current)) {
		if _, wanted := desired[pod]; !wanted && current[pod].Owner == owner {
			p.Changes.Delete = append(p.Changes.Delete, current[pod])
		}
	}
	return p
}

// Same reports whether two endpoints carry the same content, ignoring registeredAt.
func Same(a, b store.Endpoint) bool {
	return SameInstance(a, b) && a.Weight == b.Weight
}

// SameInstance is Same ignoring the weight too: the same instance, whatever its share of
// the traffic at the moment.
func SameInstance(a, b store.Endpoint) bool {
	return a.Service == b.Service && a.Namespace == b.Namespace && a.Pod == b.Pod &&
		a.UID == b.UID && a.Address == b.Address && maps.Equal(a.Ports, b.Ports) &&
		a.Node == b.Node && a.Zone == b.Zone && a.Cluster == b.Cluster && a.Owner == b.Owner
}

// Owned returns the records of owner, keyed by pod name.
func Owned(owner string, records map[string]store.Record) map[string]store.Record {
	out := make(map[string]store.Record, len(records))
	for pod, r := range records {
		if r.Owner == owner {
			out[pod] = r
		}
	}
	return out
}
