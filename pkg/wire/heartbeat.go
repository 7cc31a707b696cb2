package wire

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"
)

// Self-monitoring keys (issue 19), in the reserved subtree. Each writer (an operator replica
// of one cluster) has keys of its own, named by its cluster and replica, so that one writer
// never hides or deletes another's (several replicas write with --sharding=lease, several
// clusters with --store-shared):
//
//	{prefix}/.registrar/heartbeat/{cluster}/{replica}          each writer's heartbeat (Heartbeat, JSON; ReplicaHeartbeatKey)
//	{prefix}/.registrar/canary/{ns}/{cluster}.{replica}        each writer's canary endpoint (Endpoint, JSON; CanaryPod)
//	{prefix}/.registrar/heartbeat                              the single leader's heartbeat, for callers that predate
//	                                                           the keys above (HeartbeatKey): written only when one
//	                                                           replica of one cluster writes the prefix
//
// {cluster} and {replica} are Segment-encoded. Callers never see these keys: a service name
// never starts with a dot.
const (
	// HeartbeatName is the heartbeat's key under the reserved directory.
	HeartbeatName = "heartbeat"
	// CanaryName is the canary's directory under the reserved directory. Its keys have the
	// shape of a service's ({ns}/{pod} under it), so a pkg/discovery client reads them with
	// Prefix = ReservedKey(prefix) and Service = CanaryName: the callers' own code path.
	CanaryName = "canary"
)

// HeartbeatKey is the key of the single leader's heartbeat: {prefix}/.registrar/heartbeat.
// It is also the prefix of every writer's heartbeat (ReplicaHeartbeatKey): a reader of all
// heartbeats reads the keys that equal it or start with it and a slash.
func HeartbeatKey(prefix string) string { return ReservedKey(prefix, HeartbeatName) }

// ReplicaHeartbeatKey is the heartbeat of one replica of one cluster:
// {prefix}/.registrar/heartbeat/{cluster}/{replica}, both Segment-encoded.
func ReplicaHeartbeatKey(prefix, cluster, replica string) string {
	return HeartbeatKey(prefix) + "/" + Segment(cluster) + "/" + Segment(replica)
}

// ParseHeartbeatKey tells the keys of heartbeats under prefix: the single leader's
// (HeartbeatKey: legacy, no cluster in the key) or one replica's (its cluster decoded).
// ok is false for any other key.
func ParseHeartbeatKey(prefix, key string) (cluster string, legacy, ok bool) {
	base := HeartbeatKey(prefix)
	if key == base {
		return "", true, true
	}
	rest, found := strings.CutPrefix(key, base+"/")
	if !found {
		return "", false, false
	}
	seg, replica, found := strings.Cut(rest, "/")
	if !found || replica == "" || strings.Contains(replica, "/") {
		return "", false, false
	}
	cluster, err := Unsegment(seg)
	if err != nil {
		return "", false, false
	}
	return cluster, false, true
}

// CanaryPod is the last key segment of one writer's canary endpoint: "{cluster}.{replica}",
// both Segment-encoded (so the first dot separates them).
func CanaryPod(cluster, replica string) string { return Segment(cluster) + "." + Segment(replica) }

// Segment encodes a cluster or replica name as one key segment: "-" for the empty name,
// else the name with '/', '%', '.' and other characters outside a URL path segment
// percent-encoded (a cluster ID, a DNS-1123 label, is itself; "-" itself is "%2D").
func Segment(name string) string {
	switch name {
	case "":
		return "-"
	case "-":
		return "%2D"
	}
	return strings.ReplaceAll(url.PathEscape(name), ".", "%2E")
}

// Unsegment decodes a Segment.
func Unsegment(seg string) (string, error) {
	if seg == "-" {
		return "", nil
	}
	return url.PathUnescape(seg)
}

// CanaryPrefix is the reserved "service" directory of the canary's endpoints:
// {prefix}/.registrar/canary/.
func CanaryPrefix(prefix string) string { return ReservedKey(prefix, CanaryName) + "/" }

// Heartbeat is the value of a heartbeat key. Its writer writes it every Interval; a reader
// learns that the writer is alive from the key's revision advancing (its ModRevision, which
// needs no clock agreement), and from Time as a fallback on its first read.
type Heartbeat struct {
	// Writer identifies the operator process that wrote it.
	Writer string `json:"writer"`
	// Cluster is the writer's cluster ID, the cluster field of the endpoints it writes
	// (absent from heartbeats of operators that predate it).
	Cluster string `json:"cluster,omitempty"`
	// Replica names the writing replica within its cluster.
	Replica string `json:"replica,omitempty"`
	// Time is the writer's clock when it wrote the value.
	Time time.Time `json:"time"`
	// Seq counts the writer's heartbeats since it started leading.
	Seq int64 `json:"seq"`
	// IntervalSeconds is the writer's heartbeat interval.
	IntervalSeconds float64 `json:"intervalSeconds"`
	// Revision is the store revision of the writer's previous heartbeat (0 on the first).
	Revision int64 `json:"revision"`
}

// EncodeHeartbeat is the stored value of hb.
func EncodeHeartbeat(hb Heartbeat) ([]byte, error) { return json.Marshal(hb) }

// DecodeHeartbeat parses a stored heartbeat.
func DecodeHeartbeat(value []byte) (Heartbeat, error) {
	var hb Heartbeat
	err := json.Unmarshal(value, &hb)
	return hb, err
}
