package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	ktypes "k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/publish"
	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/xds"
	"github.com/registrar-dev/registrar/internal/xds/locality"
)

// The server process (xdsfleet -serve): one control plane, registrar's or the stock one, fed
// the world's changes one line at a time on stdin. Protocol, one line each:
//
//	stdout: "listening <addr>" once, then "applied <k> <unix nanos>" per change
//	stdin:  "change <k> <service> <slot>": slot <slot> of <service> gets change k's address
//	stdin:  "heap <path>": end the CPU profile (cpuProfileEnv) if one runs, and write a heap
//	        profile to path unless it is "-" (answered "heap written")
//
// It exits when stdin closes.

// The control planes compared.
const (
	implRegistrar = "registrar"
	implStock     = "stock"
)

// feeder is a control plane as the benchmark drives it.
type feeder interface {
	// apply publishes service i as the world holds it now.
	apply(w *world, i int) error
	// serve listens on 127.0.0.1 and returns the address; it serves until ctx ends.
	serve(ctx context.Context) (string, error)
}

func serveFromEnv(v string) error {
	f := strings.Split(v, ",")
	if len(f) != 3 {
		return fmt.Errorf("%s=%q: want impl,services,endpoints", serveEnv, v)
	}
	services, err1 := strconv.Atoi(f[1])
	endpoints, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil || services <= 0 || endpoints <= 0 {
		return fmt.Errorf("%s=%q: want impl,services,endpoints: %v", serveEnv, v, err)
	}
	return serveMain(f[0], services, endpoints, os.Stdin, os.Stdout)
}

func serveMain(impl string, services, endpoints int, in io.Reader, out io.Writer) error {
	w := newWorld(services, endpoints)
	var f feeder
	switch impl {
	case implRegistrar:
		f = newRegistrarFeeder()
	case implStock:
		f = newStockFeeder()
	default:
		return fmt.Errorf("unknown -impl %q (registrar or stock)", impl)
	}
	for i := range services {
		if err := f.apply(w, i); err != nil {
			return fmt.Errorf("initial publish of %s: %w", w.name(i), err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := f.serve(ctx)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(out)
	fmt.Fprintf(bw, "listening %s\n", addr)
	if err := bw.Flush(); err != nil {
		return err
	}
	cpu := newCPUProfile(os.Getenv(cpuProfileEnv))
	defer func() { _ = cpu.stop() }() // an early return; the "heap" line stops it and reports its error
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 2 && fs[0] == "heap" {
			if err := cpu.stop(); err != nil {
				return err
			}
			if fs[1] != "-" {
				if err := writeHeap(fs[1]); err != nil {
					return err
				}
			}
			logMemStats()
			fmt.Fprintf(bw, "heap written\n")
			if err := bw.Flush(); err != nil {
				return err
			}
			continue
		}
		if len(fs) != 4 || fs[0] != "change" {
			return fmt.Errorf("bad command %q", sc.Text())
		}
		k, err1 := strconv.Atoi(fs[1])
		svc, err2 := strconv.Atoi(fs[2])
		slot, err3 := strconv.Atoi(fs[3])
		if err := errors.Join(err1, err2, err3); err != nil || svc < 0 || svc >= services || slot < 0 || slot >= w.perService {
			return fmt.Errorf("bad command %q: %v", sc.Text(), err)
		}
		if err := cpu.start(); err != nil {
			return err
		}
		w.set(svc, slot, k)
		if err := f.apply(w, svc); err != nil {
			return err
		}
		fmt.Fprintf(bw, "applied %d %d\n", k, time.Now().UnixNano())
		if err := bw.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// registrarFeeder is internal/xds as the operator runs it, fed what a reconcile hands it.
type registrarFeeder struct {
	srv   *xds.Server
	ports map[string]int32
}

func newRegistrarFeeder() *registrarFeeder {
	return &registrarFeeder{
		srv:   xds.New(xds.Config{BindAddress: "127.0.0.1:0", Log: logr.Discard()}),
		ports: map[string]int32{"http": port},
	}
}

func (r *registrarFeeder) apply(w *world, i int) error {
	name, ns := w.service(i), w.namespace(i)
	pods := make([]publish.Pod, w.perService)
	for j := range w.perService {
		addr := w.addr(i, j)
		pods[j] = publish.Pod{Name: "p-" + addr, State: v1beta1.EndpointRegistered, Endpoint: store.Endpoint{
			Service: name, Namespace: ns, Pod: "p-" + addr, UID: "u-" + addr, Address: addr, Ports: r.ports, Zone: zone,
		}}
	}
	res := r.srv.Publish(publish.Registry{
		Key: ktypes.NamespacedName{Namespace: ns, Name: name}, UID: ktypes.UID("uid-" + name),
		Service: name, Ports: []string{"http"}, Pods: pods,
	})
	if !res.OK() {
		return fmt.Errorf("%s: %s", res.Reason, res.Message)
	}
	return nil
}

func (r *registrarFeeder) serve(ctx context.Context) (string, error) {
	errc := make(chan error, 1)
	go func() { errc <- r.srv.Start(ctx) }()
	select {
	case <-r.srv.Listening():
		return r.srv.Addr(), nil
	case err := <-errc:
		return "", fmt.Errorf("registrar xDS server: %w", err)
	}
}

// stockFeeder is go-control-plane's own server (server/v3 over one LinearCache per type, as
// its docs and examples set it up), fed the same resources: the Listener, RouteConfiguration
// and Cluster registrar publishes (xds.StaticResources) and the ClusterLoadAssignment built by
// the same function (locality.Build), so both serve identical bytes.
type stockFeeder struct {
	caches map[string]*cache.LinearCache
}

func newStockFeeder() *stockFeeder {
	f := &stockFeeder{caches: map[string]*cache.LinearCache{}}
	for _, t := range xds.TypeURLs {
		f.caches[t] = cache.NewLinearCache(t)
	}
	return f
}

func (s *stockFeeder) apply(w *world, i int) error {
	name := w.resource(i)
	if _, ok := s.caches[resourcev3.ClusterType].GetResources()[name]; !ok {
		static, err := xds.StaticResources(name)
		if err != nil {
			return err
		}
		for t, r := range static {
			if err := s.caches[t].UpdateResource(name, r); err != nil {
				return err
			}
		}
	}
	eps := make([]locality.Endpoint, w.perService)
	for j := range w.perService {
		addr := w.addr(i, j)
		eps[j] = locality.Endpoint{Pod: "p-" + addr, Address: addr, Port: port, Zone: zone, Health: corev3.HealthStatus_HEALTHY, Weight: 1}
	}
	res := locality.Build(eps, nil)
	return s.caches[resourcev3.EndpointType].UpdateResource(name, &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: res.Localities})
}

// serve uses the gRPC options of go-control-plane's example server (internal/example).
func (s *stockFeeder) serve(ctx context.Context) (string, error) {
	mux := &cache.MuxCache{
		Classify:      func(r *cache.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cache.DeltaRequest) string { return r.GetTypeUrl() },
		Caches:        map[string]cache.Cache{},
	}
	for t, c := range s.caches {
		mux.Caches[t] = c
	}
	gs := grpc.NewServer(
		grpc.MaxConcurrentStreams(1000000),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 30 * time.Second, PermitWithoutStream: true}),
	)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, mux, serverv3.CallbackFuncs{}))
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("stock xDS server: %w", err)
	}
	go func() {
		<-ctx.Done()
		gs.Stop()
	}()
	go func() {
		if err := gs.Serve(lis); err != nil {
			fmt.Fprintln(os.Stderr, "stock xDS server:", err)
		}
	}()
	return lis.Addr().String(), nil
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	runtime.GC() // twice: the first moves sync.Pool contents to the victim cache, the second frees them
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}

// cpuProfile is the server's CPU profile of the change phase: started by the first change,
// stopped by the heap command (or the end of the process); a no-op without a path. The
// mutex contention of the same phase is written beside it (path + ".mutex").
type cpuProfile struct {
	path    string
	f       *os.File
	started bool
}

func newCPUProfile(path string) *cpuProfile { return &cpuProfile{path: path} }

func (c *cpuProfile) start() error {
	if c.path == "" || c.started {
		return nil
	}
	c.started = true
	runtime.SetMutexProfileFraction(10)
	f, err := os.Create(c.path)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("cpu profile: %w", err)
	}
	c.f = f
	return nil
}

func (c *cpuProfile) stop() error {
	if c.f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := c.f.Close()
	c.f = nil
	if err == nil {
		err = writeProfile("mutex", c.path+".mutex")
	}
	runtime.SetMutexProfileFraction(0)
	return err
}

// logMemStats writes where the server's memory is to stderr (the run's log): the heap, the
// goroutines' stacks and the runtime's own, beside the goroutine count.
func logMemStats() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	const mib = 1 << 20
	fmt.Fprintf(os.Stderr, "xdsfleet server memory: heap in use %d MiB (live after GC %d MiB), stacks %d MiB, "+
		"runtime other %d MiB, obtained from the OS %d MiB, goroutines %d\n",
		m.HeapInuse/mib, m.HeapAlloc/mib, m.StackInuse/mib, (m.MSpanInuse+m.MCacheInuse+m.BuckHashSys+m.GCSys+m.OtherSys)/mib, m.Sys/mib, runtime.NumGoroutine())
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s profile: %w", name, err)
	}
	return f.Close()
}
