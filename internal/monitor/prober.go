package monitor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/metrics"
)

// Defaults of the Prober.
const (
	DefaultProbeInterval = 10 * time.Second
	DefaultProbeTimeout  = 2 * time.Second
)

// Cluster is the part of an etcd client the Prober uses (a *clientv3.Client).
type Cluster interface {
	MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error)
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
	AlarmList(ctx context.Context) (*clientv3.AlarmResponse, error)
}

// Prober probes one store's etcd cluster every Interval (jittered ±10 %), exports the
// registrar_store_* metrics, and calls OnChange when the verdict's OK or reason changes. It
// is a manager Runnable that runs on the leader only.
type Prober struct {
	// Store labels the metrics and names the store in messages (etcd, coredns).
	Store   string
	Cluster Cluster
	// Canary, when set, is the store's canary: its failures count in the verdict.
	Canary *Canary
	// Interval between probes and Timeout of each call (defaults above).
	Interval, Timeout time.Duration
	// OnChange is called from the Prober's goroutine when the verdict changed.
	OnChange func(prev, cur Health)
	Log      logr.Logger

	mu       sync.Mutex
	last     Health
	lastTerm uint64
	wake     chan struct{}
	once     sync.Once
}

func (p *Prober) init() {
	p.once.Do(func() {
		p.wake = make(chan struct{}, 1)
		if p.Interval <= 0 {
			p.Interval = DefaultProbeInterval
		}
		if p.Timeout <= 0 {
			p.Timeout = DefaultProbeTimeout
		}
	})
}

// NeedLeaderElection: only the leader probes (its verdict feeds the registries' status).
func (p *Prober) NeedLeaderElection() bool { return true }

// Health is the last verdict (Reason empty before the first probe).
func (p *Prober) Health() Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Wake asks for a probe now (e.g. after a canary round changed its state).
func (p *Prober) Wake() {
	p.init()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Start probes until ctx ends.
func (p *Prober) Start(ctx context.Context) error {
	p.init()
	for {
		p.ProbeOnce(ctx)
		t := time.NewTimer(time.Duration(float64(p.Interval) * (0.9 + 0.2*rand.Float64())))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-p.wake:
			t.Stop()
		}
	}
}

// ProbeOnce probes the cluster once and records the verdict.
func (p *Prober) ProbeOnce(ctx context.Context) Health {
	p.init()
	o := p.observe(ctx)
	if p.Canary != nil {
		st := p.Canary.State()
		o.Canary = &st
	}
	h := Assess(p.Store, o)
	p.export(o, h)
	p.mu.Lock()
	prev := p.last
	p.last = h
	p.mu.Unlock()
	if prev.OK != h.OK || prev.Reason != h.Reason {
		if h.OK {
			p.Log.Info("store healthy", "store", p.Store, "reason", h.Reason, "message", h.Message)
		} else {
			p.Log.Info("store unhealthy", "store", p.Store, "reason", h.Reason, "message", h.Message)
		}
		if p.OnChange != nil {
			p.OnChange(prev, h)
		}
	}
	return h
}

// observe reads the member list, every voting member's Status and the alarms, each call
// with Timeout, the members in parallel.
func (p *Prober) observe(ctx context.Context) Observation {
	lctx, cancel := context.WithTimeout(ctx, p.Timeout)
	ml, err := p.Cluster.MemberList(lctx)
	cancel()
	if err != nil {
		return Observation{ListErr: err}
	}
	var o Observation
	var wg sync.WaitGroup
	for _, m := range ml.Members {
		if m.IsLearner {
			continue
		}
		ms := MemberStatus{Name: m.Name, ID: m.ID}
		if ms.Name == "" {
			ms.Name = strconv.FormatUint(m.ID, 16)
		}
		if len(m.ClientURLs) == 0 {
			ms.Err = fmt.Errorf("member %s has no client URL (not started)", ms.Name)
			o.Members = append(o.Members, ms)
			continue
		}
		ms.Endpoint = m.ClientURLs[0]
		o.Members = append(o.Members, ms)
	}
	for i := range o.Members {
		if o.Members[i].Err != nil {
			continue
		}
		wg.Go(func() { p.status(ctx, &o.Members[i]) })
	}
	actx, cancel := context.WithTimeout(ctx, p.Timeout)
	alarms, err := p.Cluster.AlarmList(actx)
	cancel()
	if err == nil {
		o.Alarms = map[string]int{}
		for _, a := range alarms.Alarms {
			if a.Alarm != etcdserverpb.AlarmType_NONE {
				o.Alarms[a.Alarm.String()]++
			}
		}
	}
	wg.Wait()
	return o
}

func (p *Prober) status(ctx context.Context, ms *MemberStatus) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	start := time.Now()
	st, err := p.Cluster.Status(ctx, ms.Endpoint)
	ms.Took = time.Since(start)
	if err != nil {
		ms.Err = err
		return
	}
	// st.Errors carries the member's raised alarms ("alarm:NOSPACE"): it still answers, and
	// the alarms are reported from AlarmList; it is not a down member.
	ms.Leader, ms.Term = st.Leader, st.RaftTerm
	ms.DBSize, ms.DBInUse, ms.DBQuota = st.DbSize, st.DbSizeInUse, st.DbSizeQuota
}

// export sets the registrar_store_* metrics of one probe.
func (p *Prober) export(o Observation, h Health) {
	s := p.Store
	metrics.StoreHealthy.WithLabelValues(s).Set(b2f(h.OK))
	if o.ListErr != nil {
		metrics.StoreMembersHealthy.WithLabelValues(s).Set(0)
		metrics.StoreLeaderPresent.WithLabelValues(s).Set(0)
		metrics.StoreFailureTolerance.WithLabelValues(s).Set(-1) // the member count is unknown: kept
		return
	}
	metrics.StoreMembers.WithLabelValues(s).Set(float64(h.Members))
	metrics.StoreMembersHealthy.WithLabelValues(s).Set(float64(h.Healthy))
	metrics.StoreQuorum.WithLabelValues(s).Set(float64(h.Quorum))
	metrics.StoreFailureTolerance.WithLabelValues(s).Set(float64(h.Tolerance))
	metrics.StoreLeaderPresent.WithLabelValues(s).Set(b2f(h.LeaderPresent))
	metrics.StoreDBQuota.WithLabelValues(s).Set(float64(h.Quota))
	if h.Term > 0 {
		metrics.StoreRaftTerm.WithLabelValues(s).Set(float64(h.Term))
		p.mu.Lock()
		if p.lastTerm != 0 && h.Term > p.lastTerm {
			metrics.StoreLeaderChanges.WithLabelValues(s).Add(float64(h.Term - p.lastTerm))
		} else {
			metrics.StoreLeaderChanges.WithLabelValues(s).Add(0)
		}
		p.lastTerm = max(p.lastTerm, h.Term)
		p.mu.Unlock()
	}
	for _, m := range o.Members {
		if m.Err != nil {
			continue
		}
		metrics.StoreDBSize.WithLabelValues(s, m.Name).Set(float64(m.DBSize))
		metrics.StoreDBSizeInUse.WithLabelValues(s, m.Name).Set(float64(m.DBInUse))
		metrics.StoreProbeDuration.WithLabelValues(s, m.Name).Observe(m.Took.Seconds())
	}
	for _, a := range []string{etcdserverpb.AlarmType_NOSPACE.String(), etcdserverpb.AlarmType_CORRUPT.String()} {
		metrics.StoreAlarms.WithLabelValues(s, a).Set(float64(o.Alarms[a]))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
