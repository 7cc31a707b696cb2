package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// SelfRegistration is the comparison baseline, a "TTL heartbeat registry" client: the
// service itself puts {Prefix}/{Pod} = {"address","pod"} under an etcd lease of TTL and
// refreshes the lease every KeepAlive. A key whose owner dies or is cut off stays listed
// until the lease expires.
type SelfRegistration struct {
	Client    *clientv3.Client
	Prefix    string
	Pod       string
	Address   string
	TTL       time.Duration
	KeepAlive time.Duration
	Log       *log.Logger

	mu           sync.Mutex
	lease        clientv3.LeaseID
	deregistered bool // Deregister ran: the heartbeats stop and nothing registers again
}

// Entry is the JSON value of a self-registered key.
type Entry struct {
	Address string `json:"address"`
	Pod     string `json:"pod"`
}

// Key is the etcd key of the registration.
func (r *SelfRegistration) Key() string { return strings.TrimSuffix(r.Prefix, "/") + "/" + r.Pod }

// Register grants a lease of TTL and puts the key with it.
func (r *SelfRegistration) Register(ctx context.Context) error {
	value, err := json.Marshal(Entry{Address: r.Address, Pod: r.Pod})
	if err != nil {
		return err
	}
	ttl := int64((r.TTL + time.Second - 1) / time.Second) // whole seconds, rounded up
	grant, err := r.Client.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("grant lease: %w", err)
	}
	if _, err := r.Client.Put(ctx, r.Key(), string(value), clientv3.WithLease(grant.ID)); err != nil {
		return fmt.Errorf("put %s: %w", r.Key(), err)
	}
	r.mu.Lock()
	r.lease = grant.ID
	r.mu.Unlock()
	r.logf("registered %s = %s (lease %x, ttl %ds)", r.Key(), value, grant.ID, grant.TTL)
	return nil
}

// Run refreshes the lease with KeepAliveOnce every KeepAlive until ctx ends or Deregister
// runs; when the lease is gone (it expired while etcd was unreachable) it registers again.
func (r *SelfRegistration) Run(ctx context.Context) {
	tick := time.NewTicker(r.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.mu.Lock()
		lease, done := r.lease, r.deregistered
		r.mu.Unlock()
		if done {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, r.KeepAlive)
		_, err := r.Client.KeepAliveOnce(cctx, lease)
		r.mu.Lock()
		done = r.deregistered
		r.mu.Unlock()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && !done {
			r.logf("lease %x expired; registering again", lease)
			err = r.Register(cctx)
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			r.logf("keepalive: %v", err)
		}
	}
}

// Deregister revokes the lease, which deletes the key, and ends the heartbeats of Run (a
// deregistered instance is shutting down: it must not register again).
func (r *SelfRegistration) Deregister(ctx context.Context) error {
	r.mu.Lock()
	lease := r.lease
	r.deregistered = true
	r.mu.Unlock()
	if _, err := r.Client.Revoke(ctx, lease); err != nil {
		return fmt.Errorf("revoke lease %x: %w", lease, err)
	}
	r.logf("deregistered %s", r.Key())
	return nil
}

func (r *SelfRegistration) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log.Printf(format, args...)
	}
}
