package breaker_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/registrar-dev/registrar/bench/breaker"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// TestShortScenario is make bench-breaker's scenario with a 3 s failure, as a correctness
// test: with the coordinated breaker exactly one probe reaches the recovered dependency in
// its first second, and the breakers write to the store on transitions only.
func TestShortScenario(t *testing.T) {
	if os.Getenv("ETCD_BIN") == "" && os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("neither ETCD_BIN nor KUBEBUILDER_ASSETS is set; run hack/envtest-assets.sh and set ETCD_BIN")
	}
	srv, err := etcdtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cfg := breaker.Defaults()
	cfg.Endpoint, cfg.Prefix, cfg.Coordinated = srv.Endpoint(), "/short", true
	cfg.FailFor, cfg.Callers = 3*time.Second, 30
	cfg.StoreTimeout = 3 * time.Second // a busy test machine must not look like a store outage
	res, err := breaker.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.ProbesFirstSecond != 1 {
		t.Errorf("coordinated: %d probes reached the dependency in its first second after recovery, want 1", res.ProbesFirstSecond)
	}
	if res.Calls == 0 || res.WritesPerCall > 0.1 {
		t.Errorf("store writes per call %.4f over %d calls, want about 0", res.WritesPerCall, res.Calls)
	}
	if res.FleetClosedAfter < 0 {
		t.Errorf("the fleet never closed again within %s", cfg.MaxAfter)
	}
}
