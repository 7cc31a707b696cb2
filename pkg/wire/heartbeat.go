package wire

import (
	"encoding/json"
	"time"
)

// Self-monitoring keys (issue 19), in the reserved subtree:
//
//	{prefix}/.registrar/heartbeat          the leader's heartbeat (Heartbeat, JSON)
//	{prefix}/.registrar/canary/{ns}/{pod}  the canary's synthetic endpoints (Endpoint, JSON)
//
// Callers never see them: a service name never starts with a dot.
const (
	// HeartbeatName is the heartbeat's key under the reserved directory.
	HeartbeatName = "heartbeat"
	// CanaryName is the canary's directory under the reserved directory. Its keys have the
	// shape of a service's ({ns}/{pod} under it), so a pkg/discovery client reads them with
	// Prefix = ReservedKey(prefix) and Service = CanaryName: the callers' own code path.
	CanaryName = "canary"
)

// HeartbeatKey is the key of the leader's heartbeat: {prefix}/.registrar/heartbeat.
func HeartbeatKey(prefix string) string { return ReservedKey(prefix, HeartbeatName) }

// CanaryPrefix is the reserved "service" directory of the canary's endpoints:
// {prefix}/.registrar/canary/.
func CanaryPrefix(prefix string) string { return ReservedKey(prefix, CanaryName) + "/" }

// Heartbeat is the value of HeartbeatKey. The leader writes it every Interval; a reader
// learns that the writer is alive from the key's revision advancing (its ModRevision, which
// needs no clock agreement), and from Time as a fallback on its first read.
type Heartbeat struct {
	// Writer identifies the operator process that wrote it.
	Writer string `json:"writer"`
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
