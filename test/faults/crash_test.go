package faults

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// startStore starts a single etcd store process for one test.
func startStore(t *testing.T) *etcdtest.Server {
	t.Helper()
	requireSetup(t)
	srv, err := etcdtest.Start(t.TempDir())
	if srv != nil {
		t.Cleanup(srv.Stop)
	}
	if err != nil {
		t.Fatalf("start store: %v", err)
	}
	return srv
}

// TestOperatorCrash: kill -9 the operator mid-churn and start it again.
func TestOperatorCrash(t *testing.T) {
	srv := startStore(t)
	s := newScenario(t, []string{srv.Endpoint()})
	op := startOperator(t, "registrar", s.operatorConfig())
	for range 4 {
		s.addReady()
	}
	s.converge(time.Now())

	wait := s.churnInBackground(12, 150*time.Millisecond)
	time.Sleep(600 * time.Millisecond) // let a few churn steps land before the crash: scenario pacing
	op.Kill()
	wait()
	for range 2 { // more changes while nobody registers
		s.unready(s.oldestEligible())
		s.addReady()
	}
	op.start()
	if !waitFor(time.Minute, func() bool { return s.fenceHolder("faults") == op.Pid() }) {
		t.Fatalf("restarted operator never took the write fence")
	}
	leader := s.faultEnded()
	conv := s.converge(leader)
	s.finish("3. operator kill -9 mid-churn, restart", conv, fmt.Sprintf("convergence measured from the restarted process taking the fence; within 5 s: %v", conv <= 5*time.Second))
}

// TestLeaderFailover: two operators with leader election. Kill the leader; then pause the
// new one (SIGSTOP) until the other takes over and writes, and resume it: its writes are
// fenced and it steps down.
func TestLeaderFailover(t *testing.T) {
	srv := startStore(t)
	s := newScenario(t, []string{srv.Endpoint()})
	cfg := s.operatorConfig()
	cfg.leaderNamespace = s.ns
	ops := []*operator{startOperator(t, "registrar-a", cfg), startOperator(t, "registrar-b", cfg)}
	leaderOf := func() (*operator, *operator) {
		pid := s.fenceHolder(s.ns)
		for i, o := range ops {
			if o.running() && o.Pid() == pid {
				return o, ops[1-i]
			}
		}
		return nil, nil
	}
	var leader, follower *operator
	if !waitFor(time.Minute, func() bool { leader, follower = leaderOf(); return leader != nil }) {
		t.Fatal("no operator took the write fence")
	}
	for range 4 {
		s.addReady()
	}
	s.converge(time.Now())

	// Kill the leader mid-churn: the follower takes over within the lease (4 s) and converges.
	wait := s.churnInBackground(9, 150*time.Millisecond)
	time.Sleep(400 * time.Millisecond) // scenario pacing: crash mid-churn
	leader.Kill()
	killed := time.Now()
	wait()
	if !waitFor(time.Minute, func() bool { l, _ := leaderOf(); return l == follower }) {
		t.Fatal("the follower did not take over after the leader was killed")
	}
	takeover := time.Since(killed)
	s.faultEnded()
	conv := s.converge(time.Now())
	leader.start() // comes back as the follower
	old, next := follower, leader

	// Pause the leader until the other takes over and writes; then resume it.
	old.signal(syscall.SIGSTOP)
	paused := time.Now()
	s.churn(3, 100*time.Millisecond) // queued for the paused leader too
	if !waitFor(time.Minute, func() bool { l, _ := leaderOf(); return l == next }) {
		old.signal(syscall.SIGCONT)
		t.Fatal("the follower did not take over from the paused leader")
	}
	takeover2 := time.Since(paused)
	s.faultEnded()
	conv2 := s.converge(time.Now())
	s.churn(3, 100*time.Millisecond) // the new leader's writes, which the old one must not undo
	s.converge(time.Now())
	old.signal(syscall.SIGCONT)
	if !old.WaitExit(time.Minute) {
		t.Error("the resumed old leader did not step down (exit) within a minute")
	}
	how := "lease loss"
	if old.LogContains("another leader took the store's write fence") {
		how = "write fence"
	}
	s.converge(time.Now())
	s.finish("4. leader failover (kill -9; then SIGSTOP/SIGCONT)", max(conv, conv2),
		fmt.Sprintf("takeover after kill %s, after SIGSTOP %s (lease 4 s); convergence after takeover %s / %s; resumed old leader exited via %s",
			takeover.Round(100*time.Millisecond), takeover2.Round(100*time.Millisecond), conv.Round(10*time.Millisecond), conv2.Round(10*time.Millisecond), how))
}
