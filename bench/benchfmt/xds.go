package benchfmt

import "time"

// XDSRun is the raw result of one run of the xDS benchmark (test/xds/bench_test.go, written
// to XDS_BENCH_OUT); bench/xds publishes several as the runs of an Envelope of kind
// "bench-xds". Lags are from the API write of a pod's readiness (the request sent).
type XDSRun struct {
	Started     time.Time  `json:"started"`
	Finished    time.Time  `json:"finished"`
	Commit      string     `json:"commit"`
	Cores       int        `json:"cores"`
	LoadBefore  [3]float64 `json:"load_before"`
	LoadAfter   [3]float64 `json:"load_after"`
	WallSeconds float64    `json:"wall_seconds"` // the measured window: first write → last change acknowledged

	Clients         int     `json:"clients"`
	ClientKind      string  `json:"client_kind"`
	Registries      int     `json:"registries"`
	PodsPerRegistry int     `json:"pods_per_registry"`
	TargetRate      float64 `json:"target_rate_per_s"`
	Writes          int     `json:"writes"`
	// Changes is the writes acknowledged by every client (each one is a change of an idle
	// registry: none had another change in flight).
	Changes int `json:"changes"`
	// NoIdleTicks counts the load generator's ticks skipped because every registry still
	// had a change in flight.
	NoIdleTicks  int     `json:"no_idle_ticks"`
	AchievedRate float64 `json:"achieved_rate_per_s"`

	// Stages: API write → each stage, per change.
	Floor        XDSLag  `json:"floor"`             // a plain API watch of the same pods sees the write
	OperatorSaw  XDSLag  `json:"operator_saw"`      // the operator's pod informer sees it
	CacheSet     XDSLag  `json:"cache_set"`         // the ClusterLoadAssignment enters the xDS cache
	FirstAck     XDSLag  `json:"first_ack"`         // the first client acknowledges it
	AllAcks      XDSLag  `json:"all_acks"`          // the last of the clients acknowledges it
	OverFloor    XDSLag  `json:"over_floor"`        // per change: all clients' ACK − the floor's watch event
	P99OverFloor float64 `json:"p99_over_floor_ms"` // AllAcks.P99 − Floor.P99: the target's figure

	// Pushes, counted by the clients over the measured window.
	Responses          int     `json:"eds_responses"`
	CLAs               int     `json:"cla_count"`
	Bytes              int     `json:"bytes"`
	RedundantCLAs      int     `json:"redundant_cla_count"` // a ClusterLoadAssignment whose content the client already had
	ResponsesPerChange float64 `json:"eds_responses_per_change_per_client"`
	CLAsPerChange      float64 `json:"cla_per_change_per_client"`
	CLAsPerResponse    float64 `json:"cla_per_response"`
	BytesPerResponse   float64 `json:"bytes_per_response"`
	BytesPerCLA        float64 `json:"bytes_per_cla"`
	CPUCores           XDSCPU  `json:"cpu_cores"`
	Busy               bool    `json:"busy"` // other processes used ≥ BusyCores during the run
	Definitions        string  `json:"definitions"`
}

// XDSLag are nearest-rank percentiles in milliseconds.
type XDSLag struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// XDSCPU is the CPU used during the measured window, in cores (CPU seconds per second).
type XDSCPU struct {
	// Operator is the test process: the operator (manager, reconcilers, xDS server) with the
	// load generator and the floor's watch.
	Operator  float64 `json:"operator"`
	APIServer float64 `json:"apiserver"` // kube-apiserver and its etcd
	Store     float64 `json:"store"`     // the etcd the operator registers in
	Clients   float64 `json:"clients"`   // the client process
	Other     float64 `json:"other"`     // the rest of the machine: other engineers' work
}

// BusyCores is the CPU of other processes (in cores) from which a run is flagged busy.
const BusyCores = 0.25
