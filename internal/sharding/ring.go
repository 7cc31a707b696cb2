// Package sharding spreads ServiceRegistries over several registrar replicas: a stable hash
// puts every namespace in one of a fixed number of shards, rendezvous hashing assigns each
// shard to one live member, and membership is read from one Lease per replica. The package
// holds the pure decisions (which shard, which owner, who is alive, what to do next), with
// an injected clock; Coordinator carries them out.
package sharding

import (
	"hash/fnv"
	"slices"
	"strconv"
)

// ShardOf is the shard of a namespace: FNV-1a of the name, modulo shards. Every registry,
// pod and Deployment of a namespace is in the same shard, so one replica sees all the
// writers of a service name in that namespace (overlaps, renames). shards < 1 counts as 1.
func ShardOf(namespace string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace))
	return int(h.Sum32() % uint32(shards))
}

// score is the rendezvous weight of member for shard.
func score(member string, shard int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(shard)))
	// FNV's low bits mix poorly for short inputs that differ in the last byte: finalise
	// (splitmix64) so that every member wins about shards/len(members) shards.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Owner is the member a shard belongs to: the highest rendezvous weight (ties go to the
// smaller name), "" when there are no members. A member joining takes only the shards it
// now wins, and a member leaving gives up only its own: every other shard stays put.
func Owner(shard int, members []string) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		s := score(m, shard)
		if best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// Assignment is the owner of every shard.
func Assignment(shards int, members []string) []string {
	out := make([]string, max(shards, 1))
	for i := range out {
		out[i] = Owner(i, members)
	}
	return out
}

// Counts is how many shards each member owns in an assignment (members with none are
// listed with 0).
func Counts(assignment, members []string) map[string]int {
	out := make(map[string]int, len(members))
	for _, m := range members {
		out[m] = 0
	}
	for _, m := range assignment {
		if m != "" {
			out[m]++
		}
	}
	return out
}

// sortedUnique returns members sorted, without duplicates or empty names.
func sortedUnique(members []string) []string {
	out := slices.DeleteFunc(slices.Clone(members), func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out)
}
