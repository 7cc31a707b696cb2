package multicluster_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	grpcxds "google.golang.org/grpc/xds"

	"github.com/registrar-dev/registrar/internal/xds"
)

// echo is a real gRPC server standing in for one pod: it answers UnaryCall with
// "<cluster>/<pod>".
type echo struct {
	testgrpc.UnimplementedTestServiceServer
	name string
}

func (e *echo) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Hostname: e.name}, nil
}

// A proxyless gRPC client (grpc-go's xDS resolver and balancers) of east's xDS server: east's
// pods at priority 0, west's (read from the shared store by east's follower) at priority 1.
// The pods are real gRPC servers on loopback addresses (127.0.3.x for east, 127.0.4.x for
// west, one port), which the pods report as their IPs.
var _ = Describe("A gRPC client of one cluster's xDS server", Ordered, func() {
	const service = "echo"
	name := xds.ResourceName(service, ns)
	var port int32

	BeforeAll(func() {
		var listeners []net.Listener
		ips := []string{"127.0.3.1", "127.0.3.2", "127.0.4.1", "127.0.4.2"}
		for attempt := 0; attempt < 20 && len(listeners) < len(ips); attempt++ {
			for _, l := range listeners {
				_ = l.Close()
			}
			listeners = nil
			l, err := net.Listen("tcp", ips[0]+":0")
			Expect(err).NotTo(HaveOccurred())
			port = int32(l.Addr().(*net.TCPAddr).Port)
			listeners = append(listeners, l)
			for _, ip := range ips[1:] {
				l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, port))
				if err != nil {
					break
				}
				listeners = append(listeners, l)
			}
		}
		Expect(listeners).To(HaveLen(len(ips)), "one common free port on the backends' addresses")
		for i, l := range listeners {
			srv := grpc.NewServer()
			testgrpc.RegisterTestServiceServer(srv, &echo{name: []string{"east", "west"}[i/2] + fmt.Sprintf("/echo-%d", i%2)})
			go func() { _ = srv.Serve(l) }()
			DeferCleanup(srv.Stop)
		}
		for id, m := range clusters {
			newRegistryPort(m, ns, service, port)
			base := map[string]string{"east": "127.0.3.", "west": "127.0.4."}[id]
			readyPod(m, ns, "echo-0", base+"1")
			readyPod(m, ns, "echo-1", base+"2")
		}
	})

	It("reaches east's pods, fails over to west's (priority 1) when east has none, and comes back", func() {
		east := clusters["east"]
		Eventually(east.op.xds.Listening()).WithTimeout(timeout).Should(BeClosed())
		// East's assignment holds its own pods at priority 0 and west's, from the shared
		// store, at priority 1.
		Eventually(func() []string { return priorities(east.op.xds, name) }).WithTimeout(timeout).WithPolling(poll).Should(Equal([]string{
			"p0 /: echo-0@127.0.3.1 echo-1@127.0.3.2",
			"p1 west/: echo-0@127.0.4.1 echo-1@127.0.4.2",
		}))
		bootstrap := fmt.Sprintf(`{
			"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
			"node": {"id": "east-client", "locality": {"zone": ""}}
		}`, east.op.xds.Addr())
		resolver, err := grpcxds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
		Expect(err).NotTo(HaveOccurred())
		cc, err := grpc.NewClient("xds:///"+name, grpc.WithResolvers(resolver), grpc.WithTransportCredentials(insecure.NewCredentials()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cc.Close)
		client := testgrpc.NewTestServiceClient(cc)
		call := func() string {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			if err != nil {
				return "error: " + err.Error()
			}
			return resp.GetHostname()
		}
		Eventually(func() map[string]int { return servedBy(call, 20) }).WithTimeout(timeout).WithPolling(poll).
			Should(And(HaveKey("east/echo-0"), HaveKey("east/echo-1")), "both of east's pods serve")
		Expect(clustersOf(servedBy(call, 50))).To(Equal(map[string]int{"east": 50}), "east's pods only while east has some")

		// East's pods turn unready: its registrar publishes an empty priority 0 and the
		// client fails over to west's pods at priority 1.
		start := time.Now()
		for _, pod := range []string{"echo-0", "echo-1"} {
			p := podNamed(east, pod)
			setPodStatus(east, p, p.Status.PodIP, false)
		}
		var failover time.Duration
		Eventually(func() string {
			got := call()
			if strings.HasPrefix(got, "west/") && failover == 0 {
				failover = time.Since(start)
			}
			return got
		}).WithTimeout(timeout).WithPolling(2 * time.Millisecond).Should(HavePrefix("west/"))
		GinkgoWriter.Printf("xds failover: east's pods unready (API write) -> first RPC served by west: %s\n", failover)
		AddReportEntry("xDS cross-cluster failover", failover.String())
		Expect(priorities(east.op.xds, name)).To(Equal([]string{"p0 /:", "p1 west/: echo-0@127.0.4.1 echo-1@127.0.4.2"}))
		Eventually(func() map[string]int { return servedBy(call, 20) }).WithTimeout(timeout).WithPolling(poll).
			Should(Equal(map[string]int{"west/echo-0": 10, "west/echo-1": 10}), "round robin over west's pods")

		// East's pods ready again: back to east.
		start = time.Now()
		for i, pod := range []string{"echo-0", "echo-1"} {
			setPodStatus(east, podNamed(east, pod), fmt.Sprintf("127.0.3.%d", i+1), true)
		}
		Eventually(call).WithTimeout(timeout).WithPolling(2 * time.Millisecond).Should(HavePrefix("east/"))
		GinkgoWriter.Printf("xds failback: east's pods ready (API write) -> first RPC served by east: %s\n", time.Since(start))
		Eventually(func() map[string]int { return clustersOf(servedBy(call, 20)) }).WithTimeout(timeout).WithPolling(poll).
			Should(Equal(map[string]int{"east": 20}))
		expectClean()
	})
})

// priorities renders srv's ClusterLoadAssignment name as "p<priority> <region>/<zone>: pod@ip ..." lines.
func priorities(srv *xds.Server, name string) []string {
	var out []string
	for _, l := range srv.LoadAssignment(name).GetEndpoints() {
		line := fmt.Sprintf("p%d %s/%s:", l.GetPriority(), l.GetLocality().GetRegion(), l.GetLocality().GetZone())
		for _, e := range l.GetLbEndpoints() {
			line += " " + e.GetMetadata().GetFilterMetadata()[xds.MetadataNamespace].GetFields()["pod"].GetStringValue() + "@" +
				e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
		}
		out = append(out, line)
	}
	return out
}

// servedBy makes n calls and counts who answered ("<cluster>/<pod>", or "error: ...").
func servedBy(call func() string, n int) map[string]int {
	out := map[string]int{}
	for range n {
		out[call()]++
	}
	return out
}

// clustersOf sums servedBy's counts per cluster.
func clustersOf(by map[string]int) map[string]int {
	out := map[string]int{}
	for who, n := range by {
		out[strings.SplitN(who, "/", 2)[0]] += n
	}
	return out
}
