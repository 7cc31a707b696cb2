package benchfmt

import "time"

// E2ERun is the raw result of one run of the end-to-end comparison (test/e2e, "Comparison
// under load", written to E2E_RESULTS); bench/e2e publishes several as the runs of an
// Envelope of kind "e2e".
type E2ERun struct {
	Started     time.Time     `json:"started"`
	Finished    time.Time     `json:"finished"`
	Seed        int64         `json:"ginkgo_seed"`
	LoadBefore  []float64     `json:"load_before"`
	LoadAfter   []float64     `json:"load_after"`
	Cores       int           `json:"cores"`
	WallSeconds float64       `json:"wall_seconds"`
	Results     []E2EScenario `json:"results"`
}

// E2EScenario is one row of a run: one fault scenario against one setup.
type E2EScenario struct {
	Scenario       string `json:"scenario"`
	Setup          string `json:"setup"`
	SetupName      string `json:"setup_name"`
	Requests       int64  `json:"requests"`
	Failed         int64  `json:"failed"`
	NoTarget       int64  `json:"no_target"`
	AfterSigterm   int64  `json:"after_sigterm"`
	RetryRequests  int64  `json:"retry_requests"`
	RetryFailed    int64  `json:"retry_failed"`
	RetryNoTarget  int64  `json:"retry_no_target"`
	ExclusionMS    *int64 `json:"exclusion_ms"`    // fault → the caller no longer picks the address (null: never left the list)
	BackMS         *int64 `json:"back_ms"`         // fault → the address listed again for good and answering (null: not back)
	LastFailMS     *int64 `json:"last_fail_ms"`    // fault → the plain caller's last failed request to the address (null: none failed)
	CameBack       bool   `json:"came_back"`       // the address was listed and answered after recovery
	VictimRestarts string `json:"victim_restarts"` // container restarts and last termination reason of the victims
	FirstErrors    string `json:"first_errors"`
}
