package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// registerOrders stands in for the registrar operator: it writes two instances of "orders"
// the way the operator does, {prefix}/{service}/{namespace}/{pod} → JSON.
func registerOrders() {
	cli, err := clientv3New(etcdEndpoint)
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	for i, pod := range []string{"orders-a", "orders-b"} {
		value := fmt.Sprintf(`{"service":"orders","namespace":"shop","pod":%q,"address":"10.0.0.%d","ports":{"http":8080}}`, pod, i+1)
		if _, err := cli.Put(context.Background(), "/registrar/services/orders/shop/"+pod, value); err != nil {
			panic(err)
		}
	}
}

// A caller watches the instances of a service and round-robins over them.
func Example() {
	registerOrders() // the operator's job

	c, err := discovery.New(discovery.Config{
		Endpoints: []string{etcdEndpoint}, // e.g. http://127.0.0.1:2379, the operator's --store-endpoints
		Service:   "orders",
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitSynced(ctx); err != nil {
		panic(err)
	}
	for range 3 {
		inst, err := c.Pick()
		if err != nil {
			panic(err)
		}
		addr, _ := inst.HostPort("http")
		fmt.Println(inst.ID(), addr)
	}
	// Output:
	// shop/orders-a 10.0.0.1:8080
	// shop/orders-b 10.0.0.2:8080
	// shop/orders-a 10.0.0.1:8080
}

// Do retries an idempotent call on another instance; failures eject instances for a while.
func ExampleClient_Do() {
	registerOrders()
	c, err := discovery.New(discovery.Config{Endpoints: []string{etcdEndpoint}, Service: "orders"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitSynced(ctx); err != nil {
		panic(err)
	}
	err = c.Do(ctx, 2, func(ctx context.Context, inst discovery.Instance) error {
		addr, _ := inst.HostPort("http")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/orders/42", nil)
		if err != nil {
			return discovery.Permanent(err)
		}
		_ = req // a real caller sends it: resp, err := httpClient.Do(req)
		if inst.Pod == "orders-a" {
			return errors.New("connection refused") // pretend orders-a is gone
		}
		fmt.Println("served by", inst.ID())
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// served by shop/orders-b
	// err: <nil>
}

// A subscription reports adds and removes as they are pushed from the store.
func ExampleClient_Subscribe() {
	registerOrders()
	c, err := discovery.New(discovery.Config{Endpoints: []string{etcdEndpoint}, Service: "orders"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	sub := c.Subscribe()
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cli, _ := clientv3New(etcdEndpoint)
	defer cli.Close()
	for seen := 0; seen < 3; {
		ch, err := sub.Next(ctx)
		if err != nil {
			panic(err)
		}
		for _, inst := range ch.Added {
			fmt.Println("added", inst.ID())
			seen++
		}
		for _, inst := range ch.Removed {
			fmt.Println("removed", inst.ID())
			seen++
		}
		if seen == 2 { // both instances known: one of them goes away
			_, _ = cli.Delete(ctx, "/registrar/services/orders/shop/orders-b")
		}
	}
	// Output:
	// added shop/orders-a
	// added shop/orders-b
	// removed shop/orders-b
}

// A caller whose service's breaker is shared with the fleet: the breaker opens when three
// callers saw the dependency fail, exactly one caller probes it, and calls are rejected
// from memory (errors.Is(err, discovery.ErrBreakerOpen)) while it is open.
func ExampleCoordinatedConfig() {
	registerOrders()
	c, err := discovery.New(discovery.Config{
		Endpoints: []string{etcdEndpoint},
		Service:   "orders",
		Breaker: discovery.BreakerConfig{
			MinCalls: 2, FailureRateThreshold: 0.5, SlowCallDuration: 300 * time.Millisecond,
			Coordinated: &discovery.CoordinatedConfig{Quorum: 3, CallerID: "example-caller"},
		},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitSynced(ctx); err != nil {
		panic(err)
	}
	err = c.Do(ctx, 2, func(ctx context.Context, inst discovery.Instance) error { return nil })
	fmt.Println(err, errors.Is(err, discovery.ErrBreakerOpen))
	fmt.Println(discovery.BreakerPrefix("", "orders"))
	// Output:
	// <nil> false
	// /registrar/services/.registrar/breakers/orders/
}
