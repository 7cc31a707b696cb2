package etcd

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaseKey is where an installation records its endpoint lease:
// {prefix}/.registrar/lease/{name} (name as in FenceKey).
func LeaseKey(prefix, name string) string {
	return path.Join("/"+strings.Trim(prefix, "/"), FenceDir, "lease", name)
}

// backstop attaches every endpoint the Store writes to one etcd lease that this process
// keeps alive, so that the endpoints expire LeaseTTL after every writer is gone instead of
// lingering (Options.LeaseTTL; off by default).
type backstop struct {
	kv     clientv3.KV
	key    string
	leases clientv3.Lease
	ttl    time.Duration
	lost   func()

	mu sync.Mutex
	id clientv3.LeaseID
	// stop ends the keep-alive of the current lease (when the Store is closed).
	stop context.CancelFunc
}

// lease returns the current lease, granting one (and starting its keep-alive) when there
// is none.
func (b *backstop) lease(ctx context.Context) (clientv3.LeaseID, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.id != 0 {
		return b.id, nil
	}
	id, err := b.adoptOrGrant(ctx)
	if err != nil {
		return 0, err
	}
	if err := b.keepAlive(id); err != nil {
		return 0, err
	}
	return id, nil
}

// adopt re-attaches the installation's lease recorded at key, when it is still alive, and
// keeps it alive: a new leader (an operator restart, a rolling update, a failover) does so
// as soon as it leads, before any write, so that its predecessor's endpoints never lapse
// while there is nothing to write. It grants nothing: with no live lease recorded there is
// nothing to keep alive. It reports whether a lease is kept alive now.
func (b *backstop) adopt(ctx context.Context) (bool, error) { //nolint:unparam // the report is part of the contract above; callers need only the error today
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.id != 0 {
		return true, nil
	}
	id, err := b.recorded(ctx)
	if err != nil || id == 0 {
		return false, err
	}
	return true, b.keepAlive(id)
}

// recorded returns the lease recorded at key when it is still alive, else 0.
func (b *backstop) recorded(ctx context.Context) (clientv3.LeaseID, error) {
	resp, err := b.kv.Get(ctx, b.key)
	if err != nil {
		return 0, fmt.Errorf("read endpoint lease %s: %w", b.key, err)
	}
	if len(resp.Kvs) != 1 {
		return 0, nil
	}
	id, err := strconv.ParseInt(string(resp.Kvs[0].Value), 16, 64)
	if err != nil {
		return 0, nil
	}
	ttl, err := b.leases.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return 0, fmt.Errorf("read endpoint lease %x: %w", id, err)
	}
	if ttl.TTL <= 0 {
		return 0, nil
	}
	return clientv3.LeaseID(id), nil
}

// keepAlive starts the keep-alive of id and makes it the current lease; b.mu is held.
func (b *backstop) keepAlive(id clientv3.LeaseID) error {
	kctx, cancel := context.WithCancel(context.Background())
	ch, err := b.leases.KeepAlive(kctx, id)
	if err != nil {
		cancel()
		return fmt.Errorf("keep endpoint lease %x alive: %w", id, err)
	}
	b.id, b.stop = id, cancel
	go b.watch(kctx, id, ch)
	return nil
}

// adoptOrGrant returns the installation's lease recorded at key when it is still alive (a
// new leader keeps its predecessor's endpoints alive that way), else grants a new one and
// records it there, the record itself attached to the lease.
func (b *backstop) adoptOrGrant(ctx context.Context) (clientv3.LeaseID, error) {
	id, err := b.recorded(ctx)
	if err != nil {
		return 0, err
	}
	if id != 0 {
		return id, nil
	}
	granted, err := b.leases.Grant(ctx, int64(max(b.ttl/time.Second, 1)))
	if err != nil {
		return 0, fmt.Errorf("grant endpoint lease: %w", err)
	}
	if _, err := b.kv.Put(ctx, b.key, strconv.FormatInt(int64(granted.ID), 16), clientv3.WithLease(granted.ID)); err != nil {
		return 0, fmt.Errorf("record endpoint lease at %s: %w", b.key, err)
	}
	return granted.ID, nil
}

// watch drains the keep-alive responses; when they end the lease has expired (or the Store
// was closed): the next write grants a new one, and lost tells the caller that the
// endpoints of the old lease are gone.
func (b *backstop) watch(ctx context.Context, id clientv3.LeaseID, ch <-chan *clientv3.LeaseKeepAliveResponse) {
	for range ch {
	}
	b.mu.Lock()
	if b.id == id {
		b.id = 0
	}
	b.mu.Unlock()
	if ctx.Err() == nil && b.lost != nil {
		b.lost()
	}
}

// Close stops keeping the Store's endpoint lease alive (its endpoints then expire after
// LeaseTTL). It is a no-op without Options.LeaseTTL.
func (s *Store) Close() {
	if s.backstop == nil {
		return
	}
	s.backstop.mu.Lock()
	defer s.backstop.mu.Unlock()
	if s.backstop.stop != nil {
		s.backstop.stop()
	}
}

// adoptLease re-attaches the recorded endpoint lease (see backstop.adopt), retrying every
// ProbeInterval until it succeeds or ctx ends: Start runs it once this replica leads.
func (s *Store) adoptLease(ctx context.Context) {
	for {
		actx, cancel := context.WithTimeout(ctx, s.callTimeout())
		_, err := s.backstop.adopt(actx)
		s.observe(actx, err)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opts.ProbeInterval):
		}
	}
}

// LeaseKeeper keeps the installation's endpoint lease alive from every replica, leader or
// not (a manager Runnable that needs no leader election): the backstop means "expire once
// every replica is gone", and a follower must keep the endpoints alive through a failover,
// whose takeover (the leader election's lease duration) may be longer than the TTL. It
// adopts the recorded lease as soon as it runs, and again after it lapsed or was replaced,
// every third of the TTL.
type LeaseKeeper struct{ Store *Store }

// NeedLeaderElection is false: every replica runs it.
func (k LeaseKeeper) NeedLeaderElection() bool { return false }

// Start keeps the recorded lease alive until ctx ends; without Options.LeaseTTL it returns.
func (k LeaseKeeper) Start(ctx context.Context) error {
	s := k.Store
	if s.backstop == nil {
		return nil
	}
	every := max(s.opts.LeaseTTL/3, 500*time.Millisecond)
	for {
		actx, cancel := context.WithTimeout(ctx, s.callTimeout())
		_, err := s.backstop.adopt(actx)
		s.observe(actx, err) // a call the caller cancelled says nothing about the store
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}
