package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ttlRegistry models self-registration with heartbeats, as in the seeds: each instance puts
// its own key under an etcd lease of TTL and keeps the lease alive (etcd's client sends a
// keepalive every TTL/3: 5 s for 15 s). A crash stops the keepalives; the key vanishes when
// the lease expires. Every deregistration of the benchmark is modelled as a crash: a
// heartbeat proves liveness, not readiness, so an unready but live instance would not
// deregister at all.
type ttlRegistry struct {
	cli  *clientv3.Client
	ttl  time.Duration
	mu   sync.Mutex
	live map[string]context.CancelFunc // pod -> stops its keepalives
	wg   sync.WaitGroup
}

func newTTLRegistry(cli *clientv3.Client, ttl time.Duration) *ttlRegistry {
	return &ttlRegistry{cli: cli, ttl: ttl, live: map[string]context.CancelFunc{}}
}

// register is the instance starting: grant a lease, put its key, keep the lease alive.
func (r *ttlRegistry) register(ctx context.Context, p benchPod) error {
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lease, err := r.cli.Grant(callCtx, int64(r.ttl/time.Second))
	if err != nil {
		return fmt.Errorf("grant lease for %s: %w", p.ID(), err)
	}
	value, _ := json.Marshal(map[string]any{"service": p.Service, "namespace": p.Namespace, "pod": p.Name,
		"address": p.IP, "ports": map[string]int{"http": 8080}})
	key := TTLPrefix + p.Service + "/" + p.Namespace + "/" + p.Name
	if _, err := r.cli.Put(callCtx, key, string(value), clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("register %s: %w", key, err)
	}
	beatCtx, stop := context.WithCancel(ctx)
	acks, err := r.cli.KeepAlive(beatCtx, lease.ID)
	if err != nil {
		stop()
		return fmt.Errorf("keep lease of %s alive: %w", key, err)
	}
	r.mu.Lock()
	if old := r.live[p.ID()]; old != nil {
		old()
	}
	r.live[p.ID()] = stop
	r.mu.Unlock()
	r.wg.Go(func() {
		for range acks { // drain acknowledgements until the keepalives stop
		}
	})
	return nil
}

// crash stops the instance's keepalives without revoking its lease.
func (r *ttlRegistry) crash(p benchPod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if stop := r.live[p.ID()]; stop != nil {
		stop()
		delete(r.live, p.ID())
	}
}

// act is the instance's side of a transition.
func (r *ttlRegistry) act(ctx context.Context, p benchPod, cause Cause) error {
	if cause == CauseReady {
		return r.register(ctx, p)
	}
	r.crash(p)
	return nil
}

// stop ends every keepalive.
func (r *ttlRegistry) stop() {
	r.mu.Lock()
	for id, stop := range r.live {
		stop()
		delete(r.live, id)
	}
	r.mu.Unlock()
	r.wg.Wait()
}
