package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ttlRegistry models self-registration with heartbeats, as in the seeds and as heartbeat
// registry clients run it: each instance puts its own key under an etcd lease of TTL and keeps
// the lease alive (etcd's client sends a keepalive every TTL/3: 5 s for 15 s). A graceful
// client revokes its lease itself when its readiness check fails and when it shuts down, as
// Eureka's and Spring Cloud Consul's clients deregister on shutdown; a crashed one stops
// sending keepalives and its key lives until the lease expires. The benchmark runs one
// registry of each kind on disjoint samples of pods (SystemTTLGraceful, SystemTTLCrash), so
// the two cases are reported apart.
type ttlRegistry struct {
	cli    *clientv3.Client
	prefix string
	ttl    time.Duration
	// graceful instances revoke their lease on every deregistration; the others crash.
	graceful bool
	mu       sync.Mutex
	live     map[string]liveInstance // pod -> its lease and what stops its keepalives
	wg       sync.WaitGroup
}

type liveInstance struct {
	lease clientv3.LeaseID
	stop  context.CancelFunc
}

func newTTLRegistry(cli *clientv3.Client, prefix string, ttl time.Duration, graceful bool) *ttlRegistry {
	return &ttlRegistry{cli: cli, prefix: prefix, ttl: ttl, graceful: graceful, live: map[string]liveInstance{}}
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
		"address": p.IP, "ports": map[string]int{portName: 8080}})
	key := r.prefix + p.Service + "/" + p.Namespace + "/" + p.Name
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
	if old, ok := r.live[p.ID()]; ok {
		old.stop()
	}
	r.live[p.ID()] = liveInstance{lease: lease.ID, stop: stop}
	r.mu.Unlock()
	r.wg.Go(func() {
		for range acks { // drain acknowledgements until the keepalives stop
		}
	})
	return nil
}

// crash is the instance dying: its keepalives stop, its lease is left to expire.
func (r *ttlRegistry) crash(p benchPod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if inst, ok := r.live[p.ID()]; ok {
		inst.stop()
		delete(r.live, p.ID())
	}
}

// revoke is the instance deregistering itself: it stops its keepalives and revokes its lease,
// which deletes its key at once.
func (r *ttlRegistry) revoke(ctx context.Context, p benchPod) error {
	r.mu.Lock()
	inst, ok := r.live[p.ID()]
	delete(r.live, p.ID())
	r.mu.Unlock()
	if !ok {
		return nil
	}
	inst.stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := r.cli.Revoke(ctx, inst.lease); err != nil {
		return fmt.Errorf("revoke lease of %s: %w", p.ID(), err)
	}
	return nil
}

// act is the instance's side of a transition.
func (r *ttlRegistry) act(ctx context.Context, p benchPod, cause Cause) error {
	switch {
	case cause == CauseReady:
		return r.register(ctx, p)
	case r.graceful:
		return r.revoke(ctx, p)
	default:
		r.crash(p)
		return nil
	}
}

// stop ends every keepalive.
func (r *ttlRegistry) stop() {
	r.mu.Lock()
	for id, inst := range r.live {
		inst.stop()
		delete(r.live, id)
	}
	r.mu.Unlock()
	r.wg.Wait()
}
