package xds_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/xds"
	"github.com/registrar-dev/registrar/internal/xds/remote"
	"github.com/registrar-dev/registrar/pkg/wire"
)

func westRecord(pod, ip, zone string) remote.Record {
	return remote.Record{Cluster: "west", Endpoint: wire.Endpoint{
		Service: "web", Namespace: "shop", Pod: pod, Address: ip, Zone: zone, Cluster: "west",
		Ports: map[string]int32{"http": 8080, "grpc": 9090},
	}}
}

// localities renders a ClusterLoadAssignment as "p<priority> <region>/<zone>: <pod>..." lines.
func localities(s *xds.Server, name string) []string {
	var out []string
	for _, l := range s.LoadAssignment(name).GetEndpoints() {
		line := ""
		for _, e := range l.GetLbEndpoints() {
			line += " " + e.GetMetadata().GetFilterMetadata()[xds.MetadataNamespace].GetFields()["pod"].GetStringValue() + "@" +
				e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
		}
		out = append(out, "p"+string(rune('0'+l.GetPriority()))+" "+l.GetLocality().GetRegion()+"/"+l.GetLocality().GetZone()+":"+line)
	}
	return out
}

func TestRemoteRecordsAtPriorityOne(t *testing.T) {
	var mu sync.Mutex
	pushes := 0
	s := startServer(t, xds.Config{OnPublished: func(xds.Published) { mu.Lock(); pushes++; mu.Unlock() }})
	count := func() int { mu.Lock(); defer mu.Unlock(); return pushes }
	const name = "web.shop"
	expect := func(step string, wantPushes int, want ...string) {
		t.Helper()
		if got := localities(s, name); len(got) != len(want) || (len(want) > 0 && fmt.Sprint(got) != fmt.Sprint(want)) {
			t.Errorf("%s: localities %q, want %q", step, got, want)
		}
		if got := count(); got != wantPushes {
			t.Errorf("%s: %d ClusterLoadAssignment pushes, want %d", step, got, wantPushes)
		}
	}

	// Records of a name with no registry here wait for one: nothing is served.
	s.SetRemote("web", "shop", []remote.Record{westRecord("web-0", "10.1.0.1", "w1")})
	expect("remote only, no registry", 0)

	s.Publish(registry("shop", "web", pod("web-0", v1beta1.EndpointRegistered, "10.0.0.1", "e1")))
	expect("registry published", 1, "p0 /e1: web-0@10.0.0.1", "p1 west/w1: web-0@10.1.0.1")

	s.SetRemote("web", "shop", []remote.Record{westRecord("web-0", "10.1.0.1", "w1"), westRecord("web-1", "10.1.0.2", "w2")})
	expect("a remote record added: one push", 2, "p0 /e1: web-0@10.0.0.1", "p1 west/w1: web-0@10.1.0.1", "p1 west/w2: web-1@10.1.0.2")

	s.SetRemote("web", "shop", []remote.Record{westRecord("web-0", "10.1.0.1", "w1"), westRecord("web-1", "10.1.0.2", "w2")})
	expect("the same records again: no push", 2, "p0 /e1: web-0@10.0.0.1", "p1 west/w1: web-0@10.1.0.1", "p1 west/w2: web-1@10.1.0.2")

	s.Publish(registry("shop", "web", pod("web-0", v1beta1.EndpointUnready, "", "")))
	expect("local set empty: placeholder at priority 0", 3, "p0 /:", "p1 west/w1: web-0@10.1.0.1", "p1 west/w2: web-1@10.1.0.2")

	s.Publish(registry("shop", "web", pod("web-0", v1beta1.EndpointRegistered, "10.0.0.1", "e1")))
	expect("local back", 4, "p0 /e1: web-0@10.0.0.1", "p1 west/w1: web-0@10.1.0.1", "p1 west/w2: web-1@10.1.0.2")

	s.SetRemote("web", "shop", nil)
	expect("remote gone: the single-cluster assignment", 5, "p0 /e1: web-0@10.0.0.1")
}

// startUnwaited starts a server without waiting for it to listen.
func startUnwaited(t *testing.T, cfg xds.Config) *xds.Server {
	t.Helper()
	s, _, _ := runServer(t, cfg)
	return s
}

func TestListensOnceOtherClustersAreListed(t *testing.T) {
	g := gomega.NewWithT(t)
	synced := make(chan struct{})
	s := startUnwaited(t, xds.Config{RemoteSynced: synced, WarmTimeout: time.Minute})
	g.Consistently(s.Listening()).WithTimeout(500*time.Millisecond).ShouldNot(gomega.BeClosed(), "listening before the other clusters' records were listed")
	close(synced)
	g.Eventually(s.Listening()).WithTimeout(10 * time.Second).Should(gomega.BeClosed())

	// Never listed: it listens after WarmTimeout all the same.
	s2 := startUnwaited(t, xds.Config{RemoteSynced: make(chan struct{}), WarmTimeout: 300 * time.Millisecond})
	g.Eventually(s2.Listening()).WithTimeout(10 * time.Second).Should(gomega.BeClosed())
}
