package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/proc"
)

// storeErrors counts the operator's failed store calls.
const storeErrors = "registrar_store_operation_errors_total"

// member is one etcd process of a three-member store cluster on 127.0.0.x.
type member struct {
	t                          *testing.T
	name, dataDir, bin         string
	clientURL, peerURL, others string
	proc                       *proc.Process
}

// startCluster starts three members on 127.0.0.2-4 and waits until the cluster serves.
func startCluster(t *testing.T) []*member {
	t.Helper()
	requireSetup(t)
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ms := make([]*member, 3)
	var initial []string
	for i := range ms {
		host := fmt.Sprintf("127.0.0.%d", i+2)
		ms[i] = &member{t: t, name: fmt.Sprintf("m%d", i), bin: bin, dataDir: filepath.Join(dir, fmt.Sprintf("m%d", i)),
			clientURL: "http://" + freeAddr(t, host), peerURL: "http://" + freeAddr(t, host)}
		initial = append(initial, ms[i].name+"="+ms[i].peerURL)
	}
	for _, m := range ms {
		m.others = strings.Join(initial, ",")
		m.start()
		t.Cleanup(m.kill)
	}
	waitServing(t, endpointsOf(ms))
	return ms
}

func endpointsOf(ms []*member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.clientURL
	}
	return out
}

// start starts the member, or starts it again on the same ports and data after kill.
func (m *member) start() {
	m.t.Helper()
	var err error
	if m.proc != nil {
		err = m.proc.Resume()
	} else {
		m.proc, err = proc.Start(proc.Config{Name: "etcd member " + m.name, Bin: m.bin, Env: etcdtest.Env(),
			LogPath: m.dataDir + ".log", Args: []string{"--name", m.name, "--data-dir", m.dataDir,
				"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
				"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
				"--initial-cluster", m.others, "--initial-cluster-state", "new",
				"--initial-cluster-token", filepath.Base(filepath.Dir(m.dataDir)), "--log-level", "error"}})
	}
	if err != nil {
		m.t.Fatalf("start etcd member %s: %v", m.name, err)
	}
}

func (m *member) kill() {
	if m.proc != nil {
		m.proc.Kill()
	}
}

// waitServing waits until a linearizable read through endpoints succeeds.
func waitServing(t *testing.T, endpoints []string) {
	t.Helper()
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: endpoints})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if !waitFor(time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "health")
		return err == nil
	}) {
		t.Fatalf("etcd cluster %v not serving", endpoints)
	}
}

// TestStoreClusterMemberLoss: a three-member store cluster loses one member during churn
// (no visible effect), then a second (quorum lost: writes fail, status says so), then both
// come back.
func TestStoreClusterMemberLoss(t *testing.T) {
	slow(t)
	ms := startCluster(t)
	s := newScenario(t, endpointsOf(ms))
	op := startOperator(t, "registrar", s.operatorConfig())
	for range 4 {
		s.addReady()
	}
	s.converge(time.Now())
	errsBefore, _ := op.metric(storeErrors)

	wait := s.churnInBackground(6, 200*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // scenario pacing: lose a member mid-churn
	ms[0].kill()
	wait()
	conv1 := s.converge(time.Now())
	if !waitFor(time.Minute, func() bool { c := s.storeSynced(); return c != nil && c.Status == metav1.ConditionTrue }) {
		t.Errorf("StoreSynced after losing one member of three = %v, want True", s.storeSynced())
	}
	errsAfter, _ := op.metric(storeErrors)

	canCommit := s.quiet()
	ms[1].kill()
	lost := time.Now()
	s.churn(3, 200*time.Millisecond)
	var reported time.Duration
	if waitFor(time.Minute, func() bool { c := s.storeSynced(); return c != nil && c.Status == metav1.ConditionFalse }) {
		reported = time.Since(lost)
	} else {
		t.Error("StoreSynced did not turn False after the store lost its quorum")
	}
	msg := ""
	if c := s.storeSynced(); c != nil {
		msg = c.Message
	}

	canCommit()
	ms[0].start()
	ms[1].start()
	waitServing(t, endpointsOf(ms))
	back := s.faultEnded()
	conv2 := s.converge(back)
	s.finish("2. 3-member store cluster: lose 1, then 2, restore", conv2,
		fmt.Sprintf("1 member lost: converged %s, %v failed store calls; 2 lost: StoreSynced=False after %s (%q); quorum back: converged %s",
			conv1.Round(10*time.Millisecond), errsAfter-errsBefore, reported.Round(100*time.Millisecond), truncate(msg, 80), conv2.Round(10*time.Millisecond)))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
