package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Self-monitoring (issue 19): the consensus and storage layers of the store (etcd), the
// leader's heartbeat and the canary. docs/operations.md ("Self-monitoring metrics") is the
// contract the shipped alert rules are written against: keep names and labels in step.

// Label names of the self-monitoring metrics.
const (
	labelStore  = "store"
	labelMember = "member"
	labelResult = "result"
)

// probeBuckets span a loopback round trip (sub-millisecond) to a call at its timeout.
var probeBuckets = prometheus.ExponentialBuckets(0.0005, 2, 15)

var (
	// StoreMembers is the number of voting members of the store's etcd cluster.
	StoreMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_members",
		Help: "Voting members of the store's etcd cluster (MemberList).",
	}, []string{labelStore})
	// StoreMembersHealthy is the number of voting members that answered Status in time.
	StoreMembersHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_members_healthy",
		Help: "Voting members of the store's etcd cluster that answered Status within the timeout without errors.",
	}, []string{labelStore})
	// StoreQuorum is members/2+1.
	StoreQuorum = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_quorum",
		Help: "Members the store's etcd cluster needs for quorum (members/2 + 1).",
	}, []string{labelStore})
	// StoreFailureTolerance is healthy − quorum.
	StoreFailureTolerance = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_failure_tolerance",
		Help: "Healthy members minus quorum: 0 means one more member failure loses quorum, negative means quorum is lost.",
	}, []string{labelStore})
	// StoreLeaderPresent is 1 when a healthy member reports a leader.
	StoreLeaderPresent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_leader_present",
		Help: "1 if a healthy member of the store's etcd cluster reports a leader, else 0.",
	}, []string{labelStore})
	// StoreRaftTerm is the highest raft term reported.
	StoreRaftTerm = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_raft_term",
		Help: "Highest raft term any member of the store's etcd cluster reports.",
	}, []string{labelStore})
	// StoreLeaderChanges counts raft term increases.
	StoreLeaderChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_store_leader_changes_total",
		Help: "Raft term increases observed in the store's etcd cluster (elections).",
	}, []string{labelStore})
	// StoreDBSize is each member's backend database size.
	StoreDBSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_db_size_bytes",
		Help: "Backend database size of each member of the store's etcd cluster (Status dbSize).",
	}, []string{labelStore, labelMember})
	// StoreDBSizeInUse is the logically used part of it.
	StoreDBSizeInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_db_size_in_use_bytes",
		Help: "Logically used part of each member's backend database (Status dbSizeInUse).",
	}, []string{labelStore, labelMember})
	// StoreDBQuota is the backend quota.
	StoreDBQuota = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_db_quota_bytes",
		Help: "Backend quota of the store's etcd cluster (Status dbSizeQuota; etcd's default 2 GiB when a member reports 0).",
	}, []string{labelStore})
	// StoreAlarms is 1 per active etcd alarm type.
	StoreAlarms = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_alarms",
		Help: "Active alarms of the store's etcd cluster by type (NOSPACE, CORRUPT): the number of members raising it, 0 when cleared.",
	}, []string{labelStore, "alarm"})
	// StoreProbeDuration times the per-member Status call.
	StoreProbeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "registrar_store_probe_duration_seconds",
		Help:    "Round trip of the Status call to each member of the store's etcd cluster.",
		Buckets: probeBuckets,
	}, []string{labelStore, labelMember})
	// StoreHealthy is the operator-level summary of the StoreHealthy condition.
	StoreHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_store_healthy",
		Help: "1 when the store's etcd cluster has a leader, holds quorum with a member to spare (or has one member), raises no alarm, is below 95% of its quota and the canary succeeds; mirrors the StoreHealthy condition of the registries.",
	}, []string{labelStore})

	// HeartbeatWrites counts the leader's heartbeat writes by result.
	HeartbeatWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_heartbeat_writes_total",
		Help: "Heartbeat writes of the leader ({prefix}/.registrar/heartbeat) by result (ok, error).",
	}, []string{labelResult})
	// HeartbeatWriteDuration times the heartbeat Put: a consensus write, disk fsync included.
	HeartbeatWriteDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "registrar_heartbeat_write_duration_seconds",
		Help:    "Round trip of the heartbeat Put: a consensus write, so it includes the members' disk fsync.",
		Buckets: probeBuckets,
	})
	// HeartbeatLastSuccess is the time of the last acknowledged heartbeat.
	HeartbeatLastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "registrar_heartbeat_last_success_timestamp_seconds",
		Help: "Unix time of the last heartbeat the store acknowledged.",
	})

	// CanaryProbes counts canary rounds by result.
	CanaryProbes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_canary_probes_total",
		Help: "Canary rounds (a synthetic endpoint written and read back through the callers' path) by store and result (ok, failed).",
	}, []string{labelStore, labelResult})
	// CanaryFailures counts failed canary rounds by the stage that failed.
	CanaryFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "registrar_canary_failures_total",
		Help: "Failed canary rounds by store and stage (write: the store refused the write; visible: not seen through the callers' path in time; cleanup: the synthetic endpoint could not be removed).",
	}, []string{labelStore, "stage"})
	// CanaryVisibility times registration to visibility through the callers' path.
	CanaryVisibility = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "registrar_canary_visibility_seconds",
		Help:    "Time from the canary's write to the store acknowledging it to a caller seeing it (watch event for etcd, DNS answer through CoreDNS).",
		Buckets: lagBuckets,
	}, []string{labelStore})
	// CanaryUp is 1 when the last canary round succeeded.
	CanaryUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_canary_up",
		Help: "1 if the last canary round of the store succeeded, 0 if it failed.",
	}, []string{labelStore})
	// CanaryLastSuccess is the time of the last successful canary round.
	CanaryLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "registrar_canary_last_success_timestamp_seconds",
		Help: "Unix time of the last successful canary round of the store.",
	}, []string{labelStore})
)

func init() {
	metrics.Registry.MustRegister(StoreMembers, StoreMembersHealthy, StoreQuorum, StoreFailureTolerance,
		StoreLeaderPresent, StoreRaftTerm, StoreLeaderChanges, StoreDBSize, StoreDBSizeInUse, StoreDBQuota,
		StoreAlarms, StoreProbeDuration, StoreHealthy,
		HeartbeatWrites, HeartbeatWriteDuration, HeartbeatLastSuccess,
		CanaryProbes, CanaryFailures, CanaryVisibility, CanaryUp, CanaryLastSuccess)
}
