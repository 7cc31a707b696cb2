// Package discoverymetrics exports the state of discovery Clients, their circuit breakers
// above all, as Prometheus metrics. It is a separate package so that pkg/discovery itself
// depends only on the etcd client; a caller that wants the metrics registers a Collector:
//
//	reg.MustRegister(discoverymetrics.NewCollector(client))
//
// Every value is read from the Clients at scrape time (Client.Stats and
// Client.BreakerStats); nothing is added to the call path.
package discoverymetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// Collector is a prometheus.Collector over a set of Clients.
type Collector struct {
	clients []*discovery.Client

	instances, ejected, connected                         *prometheus.Desc
	state, transitions, rejected, probes                  *prometheus.Desc
	shared, fallback, fallbacks, writes, errors, undecode *prometheus.Desc
	reports                                               *prometheus.Desc
	stale, heartbeatAge                                   *prometheus.Desc
}

// NewCollector returns a Collector of clients; the metrics are labelled by service, so give
// it at most one Client per service.
func NewCollector(clients ...*discovery.Client) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("registrar_discovery_"+name, help, append([]string{"service"}, labels...), nil)
	}
	return &Collector{
		clients:   clients,
		instances: d("instances", "Instances in the client's current list."),
		ejected:   d("instances_ejected", "Instances currently ejected by passive ejection."),
		connected: d("store_connected", "1 while the client's watch of the store is alive."),
		state: d("breaker_state", "State of a breaker: 0 Closed, 1 Open, 2 HalfOpen. "+
			"instance is empty for the service's breaker; endpoint breakers appear while not Closed.", "instance"),
		transitions: d("breaker_transitions_total", "Transitions of the client's breakers, by target state.", "to"),
		rejected:    d("breaker_rejected_total", "Calls the breakers rejected without calling the dependency."),
		probes:      d("breaker_probes_total", "Half-open probes the client sent."),
		shared:      d("breaker_shared_state", "The coordinated breaker's state in the client's cache: 0 Closed, 1 Open."),
		fallback:    d("breaker_coordinated_fallback", "1 while the client decides calls with its local breaker because the store is slow or unreachable."),
		fallbacks:   d("breaker_coordinated_fallbacks_total", "Switches from the coordinated breaker to the local one."),
		writes:      d("breaker_store_writes_total", "Store writes (lease grants, puts, transactions) of the coordinated breaker."),
		errors:      d("breaker_store_errors_total", "Failed store writes of the coordinated breaker."),
		undecode:    d("breaker_undecodable_total", "Breaker keys in the store whose value did not decode (ignored)."),
		reports:     d("breaker_reports", "Callers with a live failure report for the service."),
		stale: d("stale", "1 while the client considers its list stale (the operator's heartbeat or the store's "+
			"confirmation older than StaleAfter); the last known-good list is kept and served."),
		heartbeatAge: d("heartbeat_age_seconds", "Seconds since the client last saw the operator's heartbeat advance."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.instances, c.ejected, c.connected, c.state, c.transitions, c.rejected, c.probes,
		c.shared, c.fallback, c.fallbacks, c.writes, c.errors, c.undecode, c.reports, c.stale, c.heartbeatAge} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	for _, cl := range c.clients {
		svc := cl.Service()
		st := cl.Stats()
		ch <- prometheus.MustNewConstMetric(c.instances, gauge, float64(st.Instances), svc)
		ch <- prometheus.MustNewConstMetric(c.ejected, gauge, float64(st.Ejected), svc)
		ch <- prometheus.MustNewConstMetric(c.connected, gauge, b2f(st.Connected), svc)
		fr := cl.Freshness()
		ch <- prometheus.MustNewConstMetric(c.stale, gauge, b2f(fr.Stale), svc)
		ch <- prometheus.MustNewConstMetric(c.heartbeatAge, gauge, fr.HeartbeatAge.Seconds(), svc)
		bs := cl.BreakerStats()
		if !bs.Enabled {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.state, gauge, float64(bs.Service.State), svc, "")
		for _, e := range bs.Endpoints {
			ch <- prometheus.MustNewConstMetric(c.state, gauge, float64(e.State), svc, e.Instance)
		}
		for to, n := range bs.Transitions {
			ch <- prometheus.MustNewConstMetric(c.transitions, counter, float64(n), svc, discovery.BreakerState(to).String())
		}
		ch <- prometheus.MustNewConstMetric(c.rejected, counter, float64(bs.Rejected), svc)
		ch <- prometheus.MustNewConstMetric(c.probes, counter, float64(bs.Probes), svc)
		if co := bs.Coordinated; co != nil {
			ch <- prometheus.MustNewConstMetric(c.shared, gauge, float64(co.Shared), svc)
			ch <- prometheus.MustNewConstMetric(c.fallback, gauge, b2f(co.Fallback), svc)
			ch <- prometheus.MustNewConstMetric(c.fallbacks, counter, float64(co.Fallbacks), svc)
			ch <- prometheus.MustNewConstMetric(c.writes, counter, float64(co.StoreWrites), svc)
			ch <- prometheus.MustNewConstMetric(c.errors, counter, float64(co.StoreErrors), svc)
			ch <- prometheus.MustNewConstMetric(c.undecode, counter, float64(co.Undecodable), svc)
			ch <- prometheus.MustNewConstMetric(c.reports, gauge, float64(co.Reports), svc)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
