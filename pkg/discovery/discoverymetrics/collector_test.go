package discoverymetrics_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/registrar-dev/registrar/pkg/discovery"
	"github.com/registrar-dev/registrar/pkg/discovery/discoverymetrics"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

// value is the metric name{labels} of a gathered registry, or -1 when absent.
func value(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metrics
				}
			}
			return num(m)
		}
	}
	return -1
}

func num(m *dto.Metric) float64 {
	if m.GetGauge() != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

func TestCollector(t *testing.T) {
	if os.Getenv("ETCD_BIN") == "" && os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("neither ETCD_BIN nor KUBEBUILDER_ASSETS is set; run hack/envtest-assets.sh and set ETCD_BIN")
	}
	srv, err := etcdtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, svc := range []string{"pay", "ship"} {
		if _, err := cli.Put(ctx, discovery.ServicePrefix("", svc)+"ns/p0", `{"address":"10.0.0.1","ports":{"http":80}}`); err != nil {
			t.Fatal(err)
		}
	}
	local, err := discovery.New(discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "pay", Breaker: discovery.BreakerConfig{MinCalls: 2, OpenDuration: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	shared, err := discovery.New(discovery.Config{Endpoints: []string{srv.Endpoint()}, Service: "ship",
		Breaker: discovery.BreakerConfig{Coordinated: &discovery.CoordinatedConfig{Quorum: 2, StoreTimeout: 10 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	for _, c := range []*discovery.Client{local, shared} {
		if err := c.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for len(local.All()) == 0 || shared.BreakerStats().Coordinated.Fallback {
		if ctx.Err() != nil {
			t.Fatal("clients not ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		_ = local.Do(ctx, 1, func(context.Context, discovery.Instance) error { return errors.New("down") })
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(discoverymetrics.NewCollector(local, shared))
	pay := map[string]string{"service": "pay", "instance": ""}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"registrar_discovery_instances", map[string]string{"service": "pay"}, 1},
		{"registrar_discovery_breaker_state", pay, 1}, // the local client's service breaker: Open
		{"registrar_discovery_breaker_state", map[string]string{"service": "ship", "instance": ""}, 0},
		{"registrar_discovery_breaker_transitions_total", map[string]string{"service": "pay", "to": "Open"}, 2}, // the endpoint's and the service's
		{"registrar_discovery_breaker_rejected_total", map[string]string{"service": "pay"}, 1},                  // the third call
		{"registrar_discovery_breaker_coordinated_fallback", map[string]string{"service": "ship"}, 0},
		{"registrar_discovery_breaker_store_writes_total", map[string]string{"service": "ship"}, 0},
		{"registrar_discovery_breaker_shared_state", map[string]string{"service": "ship"}, 0},
		{"registrar_discovery_breaker_shared_state", map[string]string{"service": "pay"}, -1}, // not coordinated
	}
	for _, c := range checks {
		if got := value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
