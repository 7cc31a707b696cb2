package multicluster_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// Callers in east read the shared store with pkg/discovery and Locality{Cluster: "east"}:
// they call east's instances only, and when east's set empties (its pods turn unready and
// its registrar deregisters them) they go to west's. The instances are real HTTP servers on
// loopback addresses (127.0.1.x for east, 127.0.2.x for west, one port), which the pods
// report as their IPs.
var _ = Describe("Callers of a service published by several clusters", Ordered, func() {
	const service = "api"
	var port int32
	var servers []*http.Server

	BeforeAll(func() {
		l, err := net.Listen("tcp", "127.0.1.1:0")
		Expect(err).NotTo(HaveOccurred())
		port = int32(l.Addr().(*net.TCPAddr).Port)
		listeners := []net.Listener{l}
		for _, ip := range []string{"127.0.1.2", "127.0.2.1", "127.0.2.2"} {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
			Expect(err).NotTo(HaveOccurred())
			listeners = append(listeners, l)
		}
		for i, l := range listeners {
			served := "east"
			if i >= 2 {
				served = "west"
			}
			srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, served)
			})}
			servers = append(servers, srv)
			go func() { _ = srv.Serve(l) }()
		}
		DeferCleanup(func() {
			for _, s := range servers {
				_ = s.Close()
			}
		})
		for id, m := range clusters {
			newRegistryPort(m, ns, service, port)
			base := map[string]string{"east": "127.0.1.", "west": "127.0.2."}[id]
			readyPod(m, ns, "api-0", base+"1")
			readyPod(m, ns, "api-1", base+"2")
		}
	})

	It("call their own cluster's instances, and fail over to another cluster when the local set empties", func() {
		c, err := discovery.New(discovery.Config{
			Endpoints: []string{storeServer.Endpoint()}, Service: service,
			Locality: discovery.Locality{Cluster: "east"}, ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 3 * time.Second,
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Close)
		Eventually(func() int { return len(c.All()) }).WithTimeout(timeout).Should(Equal(4), "both clusters' instances listed")
		httpc := &http.Client{Timeout: 2 * time.Second}
		call := func() (string, error) {
			var served string
			err := c.Do(context.Background(), 2, func(ctx context.Context, inst discovery.Instance) error {
				hp, ok := inst.HostPort("http")
				if !ok {
					return fmt.Errorf("no port")
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hp+"/", nil)
				resp, err := httpc.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				served = string(b)
				return err
			})
			return served, err
		}
		for range 50 {
			Expect(call()).To(Equal("east"), "a caller in east is served by east while east has instances")
		}
		// East's set empties: its pods turn unready; the registrar deregisters them.
		east := clusters["east"]
		start := time.Now()
		for _, name := range []string{"api-0", "api-1"} {
			pod := podNamed(east, name)
			setPodStatus(east, pod, pod.Status.PodIP, false)
		}
		var remote time.Duration
		Eventually(func() string {
			served, err := call()
			if err != nil {
				return err.Error()
			}
			if served == "west" && remote == 0 {
				remote = time.Since(start)
			}
			return served
		}).WithTimeout(timeout).WithPolling(2 * time.Millisecond).Should(Equal("west"))
		GinkgoWriter.Printf("caller failover: east's last pod unready -> first request served by west: %s\n", remote)
		AddReportEntry("cross-cluster failover", remote.String())
		for range 20 {
			Expect(call()).To(Equal("west"))
		}
		// East comes back: callers return to it.
		for i, name := range []string{"api-0", "api-1"} {
			setPodStatus(east, podNamed(east, name), fmt.Sprintf("127.0.1.%d", i+1), true)
		}
		Eventually(call).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Equal("east"))
		expectClean()
	})
})
