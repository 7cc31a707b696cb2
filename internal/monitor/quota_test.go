package monitor_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/metrics"
	"github.com/registrar-dev/registrar/internal/monitor"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/proc"
)

// TestProberDatabaseQuota: an etcd started with a small --quota-backend-bytes fills up: the
// size and quota metrics report it, the verdict turns DatabaseNearQuota or, once etcd raises
// NOSPACE, StoreAlarm with registrar_store_alarms{alarm="NOSPACE"} = 1.
func TestProberDatabaseQuota(t *testing.T) {
	const quota = 4 << 20
	cli := startEtcd(t, fmt.Sprintf("--quota-backend-bytes=%d", quota))
	store := "etcd-" + t.Name()
	p := &monitor.Prober{Store: store, Cluster: cli, Timeout: 5 * time.Second, Log: testr.New(t)}
	ctx := context.Background()
	h := p.ProbeOnce(ctx)
	if !h.OK || h.Quota != quota {
		t.Fatalf("empty store: %+v", h)
	}
	if q := testutil.ToFloat64(metrics.StoreDBQuota.WithLabelValues(store)); q != quota {
		t.Errorf("registrar_store_db_quota_bytes = %v, want %d", q, quota)
	}
	sizeBefore := testutil.ToFloat64(metrics.StoreDBSize.WithLabelValues(store, "quota"))
	value := strings.Repeat("x", 256<<10)
	sawNear := false
	for i := 0; ; i++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(pctx, fmt.Sprintf("/fill/%d", i), value)
		cancel()
		h = p.ProbeOnce(ctx)
		sawNear = sawNear || h.Reason == v1beta1.ReasonDatabaseNearQuota
		if err != nil || h.Reason == v1beta1.ReasonStoreAlarm {
			if h.Reason != v1beta1.ReasonStoreAlarm {
				h = p.ProbeOnce(ctx)
			}
			break
		}
		if i > 200 {
			t.Fatalf("no alarm after %d puts of 256 KiB into a %d-byte quota: %+v", i, quota, h)
		}
	}
	if h.OK || h.Reason != v1beta1.ReasonStoreAlarm || !strings.Contains(h.Message, "NOSPACE") {
		t.Fatalf("full store: %+v", h)
	}
	if a := testutil.ToFloat64(metrics.StoreAlarms.WithLabelValues(store, "NOSPACE")); a != 1 {
		t.Errorf("registrar_store_alarms{alarm=NOSPACE} = %v, want 1", a)
	}
	if size := testutil.ToFloat64(metrics.StoreDBSize.WithLabelValues(store, "quota")); size <= sizeBefore || size < 0.9*quota {
		t.Errorf("registrar_store_db_size_bytes = %v (was %v), want near the %d quota", size, sizeBefore, quota)
	}
	t.Logf("passed through DatabaseNearQuota before the alarm: %v", sawNear)
}

// startEtcd starts an etcd named "quota" with extra flags and returns a client of it.
func startEtcd(t *testing.T, extra ...string) *clientv3.Client {
	t.Helper()
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	pp, err := ports.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", pp[0]), fmt.Sprintf("http://127.0.0.1:%d", pp[1])
	p, err := proc.Start(proc.Config{Name: "etcd quota", Bin: bin, Env: etcdtest.Env(), LogPath: filepath.Join(dir, "etcd.log"),
		Args: append([]string{"--name", "quota", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "quota=" + peer, "--log-level", "error"}, extra...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	eventually(t, 30*time.Second, "etcd serving", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "health")
		return err == nil
	})
	return cli
}
