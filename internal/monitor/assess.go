// Package monitor watches registrar's own store (issue 19) at three layers: consensus and
// storage (an etcd cluster's members, leader, raft term, database size against its quota,
// alarms: Prober), the leader's heartbeat (Heartbeat), and the consumer layer (a synthetic
// endpoint written and read back through the callers' path: Canary). Assess turns one
// observation into a verdict; it is pure, the rest does the I/O, each call with a timeout.
package monitor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// DefaultQuotaBytes is etcd's default backend quota (--quota-backend-bytes 0).
const DefaultQuotaBytes int64 = 2 << 30

// NearQuota is the share of the quota above which the store is reported unhealthy: etcd
// raises NOSPACE at 100 % and then refuses every write.
const NearQuota = 0.95

// MemberStatus is one voting member as one probe saw it.
type MemberStatus struct {
	Name     string
	ID       uint64
	Endpoint string
	// Err is set when Status did not answer in time.
	Err error
	// From a successful Status.
	Leader, Term             uint64
	DBSize, DBInUse, DBQuota int64
	Took                     time.Duration
}

// Observation is everything one probe of one store learned.
type Observation struct {
	// ListErr is set when the member list could not be read: the store is unreachable.
	ListErr error
	Members []MemberStatus
	// Alarms counts the members raising each active alarm type.
	Alarms map[string]int
	// Canary is the canary's state; nil when the store has no canary.
	Canary *CanaryState
}

// CanaryState is the canary's recent outcome.
type CanaryState struct {
	// ConsecutiveFailures counts the failed rounds since the last success.
	ConsecutiveFailures int
	// LastErr is the last failure.
	LastErr error
}

// Health is the verdict on one store.
type Health struct {
	Store                    string
	Members, Healthy, Quorum int
	Tolerance                int
	LeaderPresent            bool
	Term                     uint64
	MaxDBSize, Quota         int64
	Alarms                   map[string]int
	OK                       bool
	Reason, Message          string
}

// CanaryFailAfter is how many consecutive failed canary rounds make the store unhealthy.
const CanaryFailAfter = 2

// Assess returns the verdict on store from o. The first problem in this order decides the
// reason: unreachable, quorum lost, no leader, alarm, canary failing, quorum one failure
// away, database near its quota.
func Assess(store string, o Observation) Health {
	h := Health{Store: store, Alarms: o.Alarms}
	if o.ListErr != nil {
		h.Reason = v1beta1.ReasonStoreUnreachable
		h.Message = fmt.Sprintf("store %s: cannot list the etcd members: %v", store, o.ListErr)
		return h
	}
	h.Members = len(o.Members)
	h.Quorum = h.Members/2 + 1
	var down []string
	for _, m := range o.Members {
		if m.Err != nil {
			down = append(down, m.Name)
			continue
		}
		h.Healthy++
		h.LeaderPresent = h.LeaderPresent || m.Leader != 0
		h.Term = max(h.Term, m.Term)
		h.MaxDBSize = max(h.MaxDBSize, m.DBSize)
		h.Quota = max(h.Quota, m.DBQuota)
	}
	if h.Quota == 0 {
		h.Quota = DefaultQuotaBytes
	}
	h.Tolerance = h.Healthy - h.Quorum
	var alarms []string
	for a, n := range o.Alarms {
		if n > 0 {
			alarms = append(alarms, a)
		}
	}
	slices.Sort(alarms)
	switch {
	case h.Tolerance < 0:
		h.Reason = v1beta1.ReasonQuorumLost
		h.Message = fmt.Sprintf("store %s: %d of %d etcd members answer, quorum needs %d (not answering: %s); writes fail until members return",
			store, h.Healthy, h.Members, h.Quorum, strings.Join(down, ", "))
	case !h.LeaderPresent:
		h.Reason = v1beta1.ReasonNoLeader
		h.Message = fmt.Sprintf("store %s: no etcd member reports a leader (term %d); writes wait for an election", store, h.Term)
	case len(alarms) > 0:
		h.Reason = v1beta1.ReasonStoreAlarm
		h.Message = fmt.Sprintf("store %s: etcd alarm %s raised; NOSPACE refuses every write until the database is compacted, defragmented and the alarm disarmed",
			store, strings.Join(alarms, ", "))
	case o.Canary != nil && o.Canary.ConsecutiveFailures >= CanaryFailAfter:
		h.Reason = v1beta1.ReasonCanaryFailing
		h.Message = fmt.Sprintf("store %s: the last %d canary rounds failed (callers may not see changes): %v",
			store, o.Canary.ConsecutiveFailures, o.Canary.LastErr)
	case h.Members > 1 && h.Tolerance == 0:
		h.Reason = v1beta1.ReasonQuorumAtRisk
		h.Message = fmt.Sprintf("store %s: %d of %d etcd members answer (not answering: %s); one more failure loses quorum: restore them",
			store, h.Healthy, h.Members, strings.Join(down, ", "))
	case float64(h.MaxDBSize) >= NearQuota*float64(h.Quota):
		h.Reason = v1beta1.ReasonDatabaseNearQuota
		h.Message = fmt.Sprintf("store %s: etcd database %d of %d bytes (%.0f%%); compact and defragment, or raise --quota-backend-bytes",
			store, h.MaxDBSize, h.Quota, 100*float64(h.MaxDBSize)/float64(h.Quota))
	default:
		h.OK, h.Reason = true, v1beta1.ReasonStoreHealthy
		h.Message = fmt.Sprintf("store %s: %d of %d etcd members healthy, leader present, database %.0f%% of quota",
			store, h.Healthy, h.Members, 100*float64(h.MaxDBSize)/float64(h.Quota))
	}
	return h
}

// Verdict summarises several stores for a registry's StoreHealthy condition.
type Verdict struct {
	// Known is false before every monitored store was probed once.
	Known           bool
	OK              bool
	Reason, Message string
}

// Summarise combines healths (one per monitored store): healthy when all are, else the
// first unhealthy one's reason, the messages of all unhealthy ones.
func Summarise(healths []Health) Verdict {
	if len(healths) == 0 {
		return Verdict{}
	}
	v := Verdict{Known: true, OK: true}
	var msgs []string
	for _, h := range healths {
		if h.Reason == "" {
			return Verdict{}
		}
		if !h.OK {
			if v.OK {
				v.OK, v.Reason = false, h.Reason
			}
			msgs = append(msgs, h.Message)
		}
	}
	if v.OK {
		v.Reason = v1beta1.ReasonStoreHealthy
		for _, h := range healths {
			msgs = append(msgs, h.Message)
		}
	}
	v.Message = strings.Join(msgs, "; ")
	return v
}

// Set is the Probers of an installation's stores, by store name.
type Set map[string]*Prober

// Verdict summarises the monitored stores among names (every monitored store when names is
// empty); not Known when none of them is monitored or one was not probed yet.
func (s Set) Verdict(names []string) Verdict {
	if len(names) == 0 {
		for n := range s {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	var hs []Health
	for _, n := range names {
		if p, ok := s[n]; ok {
			hs = append(hs, p.Health())
		}
	}
	return Summarise(hs)
}
