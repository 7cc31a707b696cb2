package eureka

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// pollInterval is how often the follower, with no change to apply, checks readiness,
// prunes the delta window and samples the connection.
const pollInterval = time.Second

// Follower keeps a Registry equal to the store through a discovery client of every service
// (discovery.Config.AllServices). It implements Source.
type Follower struct {
	client  *discovery.Client
	reg     *Registry
	log     logr.Logger
	metrics *Metrics

	synced atomic.Bool // the client's first list is published
	ready  atomic.Bool // the registry reflects a list at or after it
}

// NewFollower follows client into reg. metrics may be nil.
func NewFollower(client *discovery.Client, reg *Registry, log logr.Logger, metrics *Metrics) *Follower {
	return &Follower{client: client, reg: reg, log: log, metrics: metrics}
}

// View is the registry's current view.
func (f *Follower) View() *View { return f.reg.View() }

// Ready reports whether the first listing of the store is loaded.
func (f *Follower) Ready() bool { return f.ready.Load() }

// Run applies the client's changes until ctx is done. It holds one subscription: no queue,
// a slow rebuild only coalesces more changes into the next one.
func (f *Follower) Run(ctx context.Context) error {
	sub := f.client.Subscribe()
	defer sub.Close()
	go func() {
		if f.client.WaitSynced(ctx) == nil {
			f.synced.Store(true)
		}
	}()
	for {
		// The synced flag is read before Next: a list Next returns (or the registry already
		// holds, when Next times out) is then at or after the first complete list.
		synced := f.synced.Load()
		nctx, cancel := context.WithTimeout(ctx, pollInterval)
		ch, err := sub.Next(nctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			f.reg.Prune()
		case err != nil:
			return err
		default:
			if f.reg.Apply(ch) {
				v := f.reg.View()
				f.log.V(1).Info("registry changed", "version", v.Version, "instances", v.Instances,
					"added", len(ch.Added), "removed", len(ch.Removed), "updated", len(ch.Updated))
			}
			f.reg.Prune()
		}
		if synced && !f.ready.Swap(true) {
			v := f.reg.View()
			f.log.Info("registry loaded", "instances", v.Instances, "applications", len(v.Apps))
		}
		if f.metrics != nil {
			f.metrics.observeView(f.reg.View())
			f.metrics.Connected.Set(boolGauge(f.client.Connected()))
			f.metrics.Ready.Set(boolGauge(f.ready.Load()))
		}
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
