package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/test/support/netproxy"
)

// selfMonFlags make the self-monitoring fast enough for a test.
var selfMonFlags = []string{"--heartbeat-interval=500ms", "--store-health-interval=500ms", "--store-health-timeout=1s",
	"--canary-interval=1s"}

// storeHealthy reads the registry's StoreHealthy condition.
func (s *scenario) storeHealthy() *metav1.Condition {
	reg := &v1beta1.ServiceRegistry{}
	if err := k8s.Get(s.ctx, client.ObjectKeyFromObject(s.reg), reg); err != nil {
		return nil
	}
	return meta.FindStatusCondition(reg.Status.Conditions, v1beta1.ConditionStoreHealthy)
}

func (s *scenario) waitStoreHealthy(status metav1.ConditionStatus, reason string) {
	s.t.Helper()
	if !waitFor(time.Minute, func() bool {
		c := s.storeHealthy()
		return c != nil && c.Status == status && c.Reason == reason
	}) {
		s.t.Fatalf("StoreHealthy = %+v, want %s/%s", s.storeHealthy(), status, reason)
	}
}

func (o *operator) waitMetric(name string, want float64) {
	o.t.Helper()
	if !waitFor(time.Minute, func() bool { v, ok := o.metric(name); return ok && v == want }) {
		v, _ := o.metric(name)
		o.t.Fatalf("%s = %v, want %v", name, v, want)
	}
}

// TestStoreQuorumMonitoring: the leader of the three-member store cluster stops: the quorum
// metrics move (3 → 2 healthy, tolerance 1 → 0) and the registry's StoreHealthy turns False
// (QuorumAtRisk); the raft term change is counted; the member returns and both recover.
// Registration is unaffected.
func TestStoreQuorumMonitoring(t *testing.T) {
	ms := startCluster(t)
	s := newScenario(t, endpointsOf(ms))
	cfg := s.operatorConfig()
	cfg.extra = selfMonFlags
	op := startOperator(t, "registrar", cfg)
	s.addReady()
	s.converge(time.Now())
	op.waitMetric("registrar_store_members", 3)
	op.waitMetric("registrar_store_members_healthy", 3)
	op.waitMetric("registrar_store_failure_tolerance", 1)
	op.waitMetric("registrar_store_leader_present", 1)
	s.waitStoreHealthy(metav1.ConditionTrue, v1beta1.ReasonStoreHealthy)

	// Stop the leader: quorum drops to one spare less and the survivors elect a new leader
	// (a raft term change).
	leader := leaderOf(t, ms)
	termBefore, _ := op.metric("registrar_store_raft_term")
	leader.kill()
	lost := time.Now()
	op.waitMetric("registrar_store_members_healthy", 2)
	op.waitMetric("registrar_store_failure_tolerance", 0)
	metricAfter := time.Since(lost)
	s.waitStoreHealthy(metav1.ConditionFalse, v1beta1.ReasonQuorumAtRisk)
	condAfter := time.Since(lost)
	if c := s.storeHealthy(); !strings.Contains(c.Message, leader.name) {
		t.Errorf("StoreHealthy message %q does not name the stopped member %s", c.Message, leader.name)
	}
	if !waitFor(time.Minute, func() bool { v, _ := op.metric("registrar_store_leader_changes_total"); return v >= 1 }) {
		t.Error("registrar_store_leader_changes_total did not move after the leader stopped")
	}
	if term, _ := op.metric("registrar_store_raft_term"); term <= termBefore {
		t.Errorf("registrar_store_raft_term %v, was %v before the leader stopped", term, termBefore)
	}
	s.addReady() // one member down: writes still commit
	s.converge(time.Now())

	leader.start()
	op.waitMetric("registrar_store_members_healthy", 3)
	s.waitStoreHealthy(metav1.ConditionTrue, v1beta1.ReasonStoreHealthy)
	s.finish("13. self-monitoring: the leader of 3 store members stopped", 0,
		fmt.Sprintf("leader %s stopped: registrar_store_members_healthy 3→2 after %s, term changed, StoreHealthy=False/QuorumAtRisk after %s; both back when the member returns",
			leader.name, metricAfter.Round(100*time.Millisecond), condAfter.Round(100*time.Millisecond)))
}

// leaderOf is the member the cluster's members agree leads.
func leaderOf(t *testing.T, ms []*member) *member {
	t.Helper()
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: endpointsOf(ms)})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var found *member
	if !waitFor(time.Minute, func() bool {
		for _, m := range ms {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := cli.Status(ctx, m.clientURL)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				found = m
				return true
			}
		}
		return false
	}) {
		t.Fatal("no member leads")
	}
	return found
}

// TestCanaryPathBroken: the callers' path to the store (the canary's reader, through a
// proxy) is cut while the operator's own path works: the canary failure metric moves and
// StoreHealthy turns False (CanaryFailing); restored, both recover.
func TestCanaryPathBroken(t *testing.T) {
	srv := startStore(t)
	proxy, err := netproxy.New(strings.TrimPrefix(srv.Endpoint(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	s := newScenario(t, []string{srv.Endpoint()})
	cfg := s.operatorConfig()
	cfg.extra = append(append([]string{}, selfMonFlags...), "--canary-store-endpoints=http://"+proxy.Addr)
	op := startOperator(t, "registrar", cfg)
	s.addReady()
	s.converge(time.Now())
	if !waitFor(time.Minute, func() bool { v, _ := op.metric("registrar_canary_visibility_seconds_count"); return v >= 2 }) {
		t.Fatal("no successful canary round")
	}
	op.waitMetric("registrar_canary_up", 1)
	s.waitStoreHealthy(metav1.ConditionTrue, v1beta1.ReasonStoreHealthy)
	failedBefore, _ := op.metric("registrar_canary_failures_total")

	proxy.Cut()
	cut := time.Now()
	op.waitMetric("registrar_canary_up", 0)
	s.waitStoreHealthy(metav1.ConditionFalse, v1beta1.ReasonCanaryFailing)
	condAfter := time.Since(cut)
	if failed, _ := op.metric("registrar_canary_failures_total"); failed-failedBefore < 2 {
		t.Errorf("registrar_canary_failures_total moved by %v, want >= 2", failed-failedBefore)
	}
	s.addReady() // the operator's own path still writes
	s.converge(time.Now())

	proxy.Restore()
	op.waitMetric("registrar_canary_up", 1)
	s.waitStoreHealthy(metav1.ConditionTrue, v1beta1.ReasonStoreHealthy)
	s.finish("14. self-monitoring: callers' path to the store cut (canary)", 0,
		fmt.Sprintf("StoreHealthy=False/CanaryFailing %s after the cut; registrar_canary_up back to 1 and StoreHealthy True once restored",
			condAfter.Round(100*time.Millisecond)))
}

// TestDiscoveryStaleWhenOperatorStops: a caller's pkg/discovery client reports its list
// stale when the operator (its heartbeat) stops, keeps the list, and is fresh again when the
// operator returns.
func TestDiscoveryStaleWhenOperatorStops(t *testing.T) {
	srv := startStore(t)
	s := newScenario(t, []string{srv.Endpoint()})
	cfg := s.operatorConfig()
	cfg.extra = selfMonFlags
	op := startOperator(t, "registrar", cfg)
	pod := s.addReady()
	s.converge(time.Now())
	const staleAfter = 3 * time.Second
	c, err := discovery.New(discovery.Config{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, Service: service, StaleAfter: staleAfter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if !waitFor(time.Minute, func() bool { f := c.Freshness(); return f.HeartbeatRevision > 0 && !f.Stale }) {
		t.Fatalf("never fresh: %+v", c.Freshness())
	}

	op.Kill()
	stopped := time.Now()
	if !waitFor(time.Minute, c.Stale) {
		t.Fatalf("not stale after the operator stopped: %+v", c.Freshness())
	}
	staleAt := time.Since(stopped)
	if f := c.Freshness(); f.Reason != "heartbeat" {
		t.Errorf("stale for %q, want heartbeat", f.Reason)
	}
	found := false
	for _, inst := range c.All() {
		found = found || inst.Pod == pod
	}
	if !found {
		t.Errorf("last known-good list not kept while stale: %v", c.All())
	}

	op.start()
	restarted := time.Now()
	if !waitFor(time.Minute, func() bool { return !c.Stale() }) {
		t.Fatalf("still stale after the operator returned: %+v", c.Freshness())
	}
	freshAfter := time.Since(restarted)
	s.converge(restarted)
	s.finish("15. self-monitoring: operator stopped, caller's staleness", 0,
		fmt.Sprintf("pkg/discovery Stale %s after the operator stopped (StaleAfter %s, heartbeat 500ms), list kept; fresh %s after it restarted",
			staleAt.Round(100*time.Millisecond), staleAfter, freshAfter.Round(100*time.Millisecond)))
}
