// Command caller is a small client of a service registered by registrar: it watches the
// service's instances in the store (pkg/discovery), sends a GET to one of them every
// interval, retries an instance that fails on another one, and prints what it did and how
// old its list is. It defaults to the embedded store that `make run` starts.
//
//	go run ./examples/caller -service orders -path /
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

func main() {
	endpoint := flag.String("store-endpoints", envOr("REGISTRAR_STORE_ENDPOINTS", "http://127.0.0.1:2379"), "etcd client URL (make run's embedded store by default)")
	prefix := flag.String("store-prefix", envOr("REGISTRAR_STORE_PREFIX", discovery.DefaultPrefix), "the operator's --store-prefix")
	service := flag.String("service", "orders", "service name (the ServiceRegistry's serviceName)")
	port := flag.String("port", "", "port name of the instances (default: the only port, or \"http\")")
	path := flag.String("path", "/", "path to GET")
	every := flag.Duration("every", time.Second, "time between calls")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *endpoint, *prefix, *service, *port, *path, *every); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, endpoint, prefix, service, port, path string, every time.Duration) error {
	// The dozen lines a caller needs: a client, a pick per call, a retry on another instance.
	c, err := discovery.New(discovery.Config{Endpoints: []string{endpoint}, Prefix: prefix, Service: service})
	if err != nil {
		return err
	}
	defer c.Close()
	syncCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := c.WaitSynced(syncCtx); err != nil {
		fmt.Println("store not reachable yet; calls fail until it is:", err)
	}
	cancel()
	httpClient := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		err := c.Do(ctx, 2, func(ctx context.Context, inst discovery.Instance) error {
			addr, ok := inst.HostPort(port)
			if !ok {
				return discovery.Permanent(fmt.Errorf("%s has no port %q: %v", inst.ID(), port, inst.Ports))
			}
			return get(ctx, httpClient, inst, "http://"+addr+path)
		})
		if err != nil {
			fmt.Printf("%s  %v (instances %d, list age %s)\n", time.Now().Format(time.TimeOnly), err, len(c.All()), c.Staleness().Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// get sends one GET; a 5xx counts as a failure of the instance, other answers do not.
func get(ctx context.Context, hc *http.Client, inst discovery.Instance, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return discovery.Permanent(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	fmt.Printf("%s  %-28s %s %s\n", time.Now().Format(time.TimeOnly), inst.ID(), url, resp.Status)
	if resp.StatusCode >= 500 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
