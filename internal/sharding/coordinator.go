package sharding

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RingLabel labels every member Lease with the name of its ring (the installation), so
// that several installations can share a namespace.
const RingLabel = "registrar.dev/shard-ring"

// Fences are the per-shard write fences in the store (internal/store/etcd/fence.Shards).
type Fences interface {
	// Acquire takes the shard's fence unless a member for which alive is true holds it;
	// ok is false (and err nil) when it is held.
	Acquire(ctx context.Context, shard int, alive func(holder string) bool) (ok bool, err error)
	// Release gives the fence up: writes guarded by it fail from now on.
	Release(ctx context.Context, shard int) error
	// Holds reports whether this replica holds the shard's fence (false once a write or
	// Verify found it taken by someone else).
	Holds(shard int) bool
	// Verify re-reads the fences this replica holds and forgets those taken by someone else.
	Verify(ctx context.Context) error
}

// Config configures a Coordinator.
type Config struct {
	// Client writes this replica's Lease; Reader lists the ring's Leases (uncached).
	Client client.Client
	Reader client.Reader
	// Namespace holds the member Leases; Ring names the installation (RingLabel).
	Namespace, Ring string
	// Identity is this member's name (unique among the ring's live replicas).
	Identity string
	// Shards is the number of shards (fixed for an installation: changing it moves
	// namespaces between fences, so change it only with every replica stopped).
	Shards int
	// LeaseDuration is how long a member counts as alive after a renewal; RenewPeriod how
	// often it renews and re-reads the ring (well below LeaseDuration).
	LeaseDuration, RenewPeriod time.Duration
	// DrainTimeout bounds the wait for running reconciles on shutdown.
	DrainTimeout time.Duration
	Fences       Fences
	Clock        clock.Clock
	Log          logr.Logger
}

// Coordinator keeps this replica's Lease renewed, reads the ring's members, and takes and
// gives up shards one tick (RenewPeriod) at a time by Next. Controllers ask it whether a
// namespace is theirs (Owns, at their queue) and bracket each reconcile with Begin, so a
// shard is released only once nothing of it runs.
type Coordinator struct {
	cfg        Config
	membership *Membership

	mu        sync.Mutex
	states    []State
	inFlight  []int
	members   []string
	lastRenew time.Time
	acquired  []func(ctx context.Context, owns func(namespace string) bool)
	released  []func(owns func(namespace string) bool)
}

// NewCoordinator returns a Coordinator; add it to the manager (it does not need leader
// election: it replaces it).
func NewCoordinator(cfg Config) *Coordinator {
	if cfg.Shards < 1 {
		cfg.Shards = 1
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	return &Coordinator{
		cfg: cfg, membership: NewMembership(cfg.Clock),
		states: make([]State, cfg.Shards), inFlight: make([]int, cfg.Shards),
	}
}

// NeedLeaderElection is false: every replica runs its Coordinator.
func (c *Coordinator) NeedLeaderElection() bool { return false }

// Shard is the shard of namespace.
func (c *Coordinator) Shard(namespace string) int { return ShardOf(namespace, c.cfg.Shards) }

// Owns reports whether this replica reconciles namespace now.
func (c *Coordinator) Owns(namespace string) bool {
	s := c.Shard(namespace)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[s] == Active
}

// Begin starts a reconcile of something in namespace: ok is false when the shard is not
// this replica's (or is draining); otherwise done must be called when it ends.
func (c *Coordinator) Begin(namespace string) (done func(), ok bool) {
	s := c.Shard(namespace)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.states[s] != Active || !c.cfg.Fences.Holds(s) {
		return nil, false
	}
	c.inFlight[s]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.inFlight[s]--
			c.mu.Unlock()
		})
	}, true
}

// OnAcquire registers f, called after shards were acquired with a predicate telling the
// namespaces of the new shards (e.g. to enqueue their objects).
func (c *Coordinator) OnAcquire(f func(ctx context.Context, owns func(namespace string) bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acquired = append(c.acquired, f)
}

// OnRelease registers f, called after shards were released or lost (e.g. to forget what
// was known of their records).
func (c *Coordinator) OnRelease(f func(owns func(namespace string) bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = append(c.released, f)
}

// Owned is the number of shards this replica holds (Active).
func (c *Coordinator) Owned() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.states {
		if s == Active {
			n++
		}
	}
	return n
}

// Start runs the ring until ctx ends, then drains and releases every shard and deletes
// this replica's Lease, so the others take over at once.
func (c *Coordinator) Start(ctx context.Context) error {
	c.cfg.Log.Info("joining the shard ring", "ring", c.cfg.Ring, "identity", c.cfg.Identity, "shards", c.cfg.Shards, "lease", c.cfg.Namespace+"/"+c.leaseName())
	for {
		c.tick(ctx)
		// Jittered so that replicas started together do not tick in lockstep.
		d := time.Duration(float64(c.cfg.RenewPeriod) * (0.9 + 0.2*rand.Float64()))
		select {
		case <-ctx.Done():
			c.leave()
			return nil
		case <-c.cfg.Clock.After(d):
		}
	}
}

// tick renews the Lease, reads the members and takes the step of every shard.
func (c *Coordinator) tick(ctx context.Context) {
	log := c.cfg.Log
	if err := c.renew(ctx); err != nil {
		log.Error(err, "renew shard membership Lease")
	} else {
		c.mu.Lock()
		c.lastRenew = c.cfg.Clock.Now()
		c.mu.Unlock()
	}
	leases, err := c.list(ctx)
	c.mu.Lock()
	if err != nil {
		log.Error(err, "list shard membership Leases")
	} else {
		c.members = c.membership.Observe(leases)
	}
	members := c.members
	// Past half the lease without a renewal the others may soon count this replica out:
	// give everything up rather than risk writing beside a new owner (the fences would
	// refuse those writes anyway).
	if c.lastRenew.IsZero() || c.cfg.Clock.Since(c.lastRenew) > c.cfg.LeaseDuration/2 {
		members = nil
	}
	c.mu.Unlock()
	if err := c.cfg.Fences.Verify(ctx); err != nil {
		log.Error(err, "verify shard fences")
	}
	alive := func(holder string) bool {
		if holder == c.cfg.Identity {
			return false // an earlier run of this member: it is gone
		}
		for _, m := range members {
			if m == holder {
				return true
			}
		}
		// Not a member by this tick's view, which may predate the holder's Lease: a member
		// creates its Lease before it takes any fence, and this read of its Lease comes after
		// the read of the fence, so a holder that just started is seen here.
		return c.leaseFresh(ctx, holder)
	}
	var gained, lost []int
	for s := range c.cfg.Shards {
		owner := Owner(s, members)
		for range 3 { // Drain can be followed by Release in the same tick
			c.mu.Lock()
			v := ShardView{State: c.states[s], Owner: owner, InFlight: c.inFlight[s]}
			v.Fenced = v.State != Idle && !c.cfg.Fences.Holds(s)
			act := Next(c.cfg.Identity, v)
			switch act {
			case Drain:
				c.states[s] = Draining
			case Resume:
				c.states[s] = Active
			case Drop:
				c.states[s] = Idle
			}
			c.mu.Unlock()
			switch act {
			case Acquire:
				ok, err := c.cfg.Fences.Acquire(ctx, s, alive)
				if err != nil {
					log.Error(err, "take shard fence", "shard", s)
				}
				if ok {
					c.setState(s, Active)
					gained = append(gained, s)
					log.V(1).Info("shard acquired", "shard", s)
				}
			case Release:
				if err := c.cfg.Fences.Release(ctx, s); err != nil {
					log.Error(err, "release shard fence", "shard", s, "owner", owner)
				} else {
					c.setState(s, Idle)
					lost = append(lost, s)
					log.V(1).Info("shard released", "shard", s, "to", owner)
				}
			case Drop:
				lost = append(lost, s)
				log.Info("shard fence taken by another member: stopped", "shard", s)
			}
			if act != Drain {
				break
			}
		}
	}
	if len(gained)+len(lost) > 0 {
		log.Info("shards changed", "members", members, "acquired", gained, "released", lost, "owned", c.Owned())
	}
	c.notify(ctx, gained, lost)
}

func (c *Coordinator) setState(s int, st State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.states[s] = st
}

func (c *Coordinator) notify(ctx context.Context, gained, lost []int) {
	c.mu.Lock()
	acquired, released := c.acquired, c.released
	c.mu.Unlock()
	if len(lost) > 0 {
		in := c.inSet(lost)
		for _, f := range released {
			f(in)
		}
	}
	if len(gained) > 0 {
		in := c.inSet(gained)
		for _, f := range acquired {
			f(ctx, in)
		}
	}
}

func (c *Coordinator) inSet(shards []int) func(string) bool {
	set := make(map[int]bool, len(shards))
	for _, s := range shards {
		set[s] = true
	}
	return func(ns string) bool { return set[c.Shard(ns)] }
}

// leave drains every shard (bounded by DrainTimeout), releases the fences and deletes the
// Lease.
func (c *Coordinator) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DrainTimeout+5*time.Second)
	defer cancel()
	c.mu.Lock()
	for s, st := range c.states {
		if st == Active {
			c.states[s] = Draining
		}
	}
	c.mu.Unlock()
	deadline := c.cfg.Clock.Now().Add(c.cfg.DrainTimeout)
	for {
		c.mu.Lock()
		running := 0
		for _, n := range c.inFlight {
			running += n
		}
		c.mu.Unlock()
		if running == 0 || c.cfg.Clock.Now().After(deadline) {
			break
		}
		<-c.cfg.Clock.After(20 * time.Millisecond) // polling the in-flight reconciles on shutdown
	}
	released := 0
	for s := range c.cfg.Shards {
		c.mu.Lock()
		draining := c.states[s] == Draining
		c.states[s] = Idle
		c.mu.Unlock()
		if draining && c.cfg.Fences.Holds(s) {
			if err := c.cfg.Fences.Release(ctx, s); err != nil {
				c.cfg.Log.Error(err, "release shard fence on shutdown", "shard", s)
				continue
			}
			released++
		}
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: c.cfg.Namespace, Name: c.leaseName()}}
	if err := c.cfg.Client.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
		c.cfg.Log.Error(err, "delete shard membership Lease")
	}
	c.cfg.Log.Info("left the shard ring", "released", released)
}

var notDNS = regexp.MustCompile(`[^a-z0-9.-]+`)

// leaseName is this member's Lease: registrar-shard-{identity}, made a valid name.
func (c *Coordinator) leaseName() string {
	return LeaseName(c.cfg.Ring, c.cfg.Identity)
}

// LeaseName is the Lease of member identity in ring.
func LeaseName(ring, identity string) string {
	n := notDNS.ReplaceAllString(strings.ToLower(ring+"-shard-"+identity), "-")
	n = strings.Trim(n, "-.")
	if len(n) > 253 {
		n = n[:253]
	}
	return n
}

func (c *Coordinator) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.RenewPeriod, time.Second))
	defer cancel()
	now := metav1.NewMicroTime(c.cfg.Clock.Now())
	secs := int32(max(c.cfg.LeaseDuration/time.Second, 1))
	var lease coordinationv1.Lease
	key := client.ObjectKey{Namespace: c.cfg.Namespace, Name: c.leaseName()}
	err := c.cfg.Reader.Get(ctx, key, &lease)
	if apierrors.IsNotFound(err) {
		lease = coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{RingLabel: c.cfg.Ring}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(c.cfg.Identity), LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now,
			},
		}
		if err := c.cfg.Client.Create(ctx, &lease); err != nil {
			return fmt.Errorf("create Lease %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Lease %s: %w", key, err)
	}
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	lease.Labels[RingLabel] = c.cfg.Ring
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = ptr.To(c.cfg.Identity), &secs, &now
	if err := c.cfg.Client.Update(ctx, &lease); err != nil {
		return fmt.Errorf("renew Lease %s: %w", key, err)
	}
	return nil
}

// leaseFresh reads holder's Lease and reports whether it was renewed less than its duration
// ago (by its renewTime: first sight, as in Membership), or could not be read (then the
// holder is given the benefit of the doubt).
func (c *Coordinator) leaseFresh(ctx context.Context, holder string) bool {
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.RenewPeriod, time.Second))
	defer cancel()
	var lease coordinationv1.Lease
	err := c.cfg.Reader.Get(ctx, client.ObjectKey{Namespace: c.cfg.Namespace, Name: LeaseName(c.cfg.Ring, holder)}, &lease)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return err != nil
	}
	d := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	return c.cfg.Clock.Since(lease.Spec.RenewTime.Time) < d
}

func (c *Coordinator) list(ctx context.Context) ([]Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.RenewPeriod, time.Second))
	defer cancel()
	var list coordinationv1.LeaseList
	if err := c.cfg.Reader.List(ctx, &list, client.InNamespace(c.cfg.Namespace), client.MatchingLabels{RingLabel: c.cfg.Ring}); err != nil {
		return nil, fmt.Errorf("list Leases of ring %s: %w", c.cfg.Ring, err)
	}
	out := make([]Lease, 0, len(list.Items))
	for _, l := range list.Items {
		if l.Spec.HolderIdentity == nil || l.Spec.LeaseDurationSeconds == nil || l.Spec.RenewTime == nil {
			continue
		}
		out = append(out, Lease{
			Holder: *l.Spec.HolderIdentity, Version: l.ResourceVersion,
			RenewTime: l.Spec.RenewTime.Time, Duration: time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second,
		})
	}
	return out, nil
}
