package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// storeOps is the number of store calls (list and apply) the operator made.
const storeOps = "registrar_store_operation_duration_seconds_count"

// TestStoreOutage: stop the store for 30 s during pod churn, then restart it.
func TestStoreOutage(t *testing.T) {
	slow(t)
	srv := startStore(t)
	s := newScenario(t, []string{srv.Endpoint()})
	op := startOperator(t, "registrar", s.operatorConfig()) // default --store-timeout (5 s)
	for range 4 {
		s.addReady()
	}
	s.converge(time.Now())
	before, ok := op.metric(storeOps)
	if !ok {
		t.Fatal("cannot read the operator's metrics")
	}

	const outage, steps = 30 * time.Second, 20
	canCommit := s.quiet()
	srv.Stop()
	down := time.Now()
	wait := s.churnInBackground(steps, outage/steps)
	var reported time.Duration
	if waitFor(outage, func() bool {
		c := s.storeSynced()
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, srv.Endpoint())
	}) {
		reported = time.Since(down)
	} else {
		t.Error("StoreSynced did not turn False with the store named while it was down")
	}
	wait()
	time.Sleep(time.Until(down.Add(outage))) // the outage lasts its full length
	during, _ := op.metric(storeOps)
	attempts := during - before
	t.Logf("resuming the store at %s", time.Now().Format(time.RFC3339Nano))
	canCommit()
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	back := s.faultEnded()
	t.Logf("store serving again at %s", back.Format(time.RFC3339Nano))
	conv := s.converge(back)
	if !waitFor(time.Minute, func() bool { c := s.storeSynced(); return c != nil && c.Status == metav1.ConditionTrue }) {
		t.Error("StoreSynced did not return to True after the store came back")
	}
	// One registry, `steps` pod events: a tight retry loop would make hundreds of calls.
	if limit := float64(2*steps + 20); attempts > limit {
		t.Errorf("%v store calls during a %s outage with %d pod events, want at most %v (backoff with jitter)", attempts, outage, steps, limit)
	}
	s.finish("1. store etcd stopped 30 s during churn", conv,
		fmt.Sprintf("StoreSynced=False after %s; %v store calls during the outage (%d pod events); converged %s after restart",
			reported.Round(100*time.Millisecond), attempts, steps, conv.Round(10*time.Millisecond)))
}
