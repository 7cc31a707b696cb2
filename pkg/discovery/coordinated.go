package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/registrar-dev/registrar/pkg/wire"
)

// BreakerDir is the directory, under the operator's prefix, that holds the coordinated
// breakers: {prefix}/.registrar/breakers/{service}/, in the reserved subtree
// (wire.ReservedDir) that never collides with {prefix}/{service}/.
const BreakerDir = wire.ReservedDir + "/breakers"

// BreakerPrefix is the key prefix of the coordinated breaker of service:
// "{prefix}/.registrar/breakers/{service}/"; with an empty service, of every service.
//
// Keys under it:
//
//	state            BreakerRecord: Open or Closed, written on transitions only
//	probe            ProbeRecord under a lease of ProbeLease: the fleet's one half-open permit
//	reports/{caller} ReportRecord under a lease of ReportTTL: this caller's breaker tripped
func BreakerPrefix(prefix, service string) string {
	if service == "" {
		return wire.ReservedKey(prefix, "breakers") + "/"
	}
	return wire.ReservedKey(prefix, "breakers", service) + "/"
}

// BreakerRecord is the value of a coordinated breaker's state key.
type BreakerRecord struct {
	// State is "Open" or "Closed".
	State string `json:"state"`
	// OpenFor is how long callers wait after seeing Open before one of them takes the probe
	// permit (each caller counts from when it saw the state, on its own clock).
	OpenFor Duration `json:"openFor,omitempty"`
	// By is the caller that wrote it; Reason why; At its clock then (for people only: no
	// caller compares timestamps).
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// ProbeRecord is the value of the probe permit key.
type ProbeRecord struct {
	Caller string    `json:"caller"`
	At     time.Time `json:"at"`
}

// ReportRecord is the value of a caller's failure report.
type ReportRecord struct {
	Caller string    `json:"caller"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Duration is a time.Duration that encodes as a Go duration string ("10s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// DecodeBreakerRecord decodes a state value; a state other than Open or Closed is an error.
func DecodeBreakerRecord(value []byte) (BreakerRecord, error) {
	var r BreakerRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return r, fmt.Errorf("decode breaker state: %w", err)
	}
	if r.State != BreakerOpen.String() && r.State != BreakerClosed.String() {
		return r, fmt.Errorf("decode breaker state: state %q is neither Open nor Closed", r.State)
	}
	if r.State == BreakerOpen.String() && r.OpenFor <= 0 {
		return r, errors.New("decode breaker state: Open without a positive openFor")
	}
	return r, nil
}

// sharedView is a caller's cached copy of the shared breaker, replaced atomically.
type sharedView struct {
	state    BreakerState // BreakerClosed or BreakerOpen
	stateRev int64        // ModRevision of the state key; 0 when absent
	openFor  time.Duration

	probeHolder string // "" when no caller holds the permit
	probeLease  int64

	reports map[string]bool // callers with a live, decodable report
}

// coordinated is a Client's side of its service's shared breaker. The call path only loads
// the cached view and atomics; a watch goroutine keeps the view, a writer goroutine makes
// the (rare) writes, so no call waits on the store.
type coordinated struct {
	bs   *breakers
	cli  *clientv3.Client
	cfg  *CoordinatedConfig
	bcfg *BreakerConfig
	c    *Client
	dir  string

	view         atomic.Pointer[sharedView]
	lastHeard    atomic.Int64 // c.now() of the last answer on the watch, unix ns; 0 = never
	writeErrAt   atomic.Int64 // c.now() of the last failed write, unix ns
	fallback     atomic.Bool
	acquireAfter atomic.Int64           // unix ns: when this caller may try to take the permit
	mine         atomic.Pointer[permit] // the permit this caller took; nil = none
	settleLease  atomic.Int64           // the permit whose probe result the writer is to write
	probing      atomic.Bool            // this caller's probe call is in flight
	probeOK      atomic.Int64           // successful probes under the current permit

	fallbacks, undecodable, writes, writeErrors atomic.Int64

	wantReport, wantAcquire atomic.Bool
	probeResult             atomic.Int32 // 0 none, 1 close, 2 reopen
	lastReason              atomic.Pointer[string]
	kick                    chan struct{}
	cancel                  context.CancelFunc
	done                    chan struct{}
}

// permit is the probe permit a caller took: until its watch shows it (the echo), the caller
// cannot probe; when its view of the store, at or after the acquire, shows the permit gone
// or someone else's, the caller lets it go and may acquire again.
type permit struct {
	lease int64
	rev   int64 // the revision of the acquire
	// echoBy is when (c.now(), unix ns) the caller stops waiting for its echo and lists
	// again: its watch may have missed it.
	echoBy int64
}

func newCoordinated(c *Client, bs *breakers) *coordinated {
	co := &coordinated{
		bs: bs, cli: c.cli, cfg: bs.cfg.Coordinated, bcfg: &bs.cfg, c: c,
		dir: BreakerPrefix(c.cfg.Prefix, c.cfg.Service), kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	if co.cfg.CallerID == "" {
		host, _ := os.Hostname()
		co.cfg.CallerID = host + "-" + strconv.Itoa(os.Getpid()) + "-" + c.id
	}
	co.view.Store(&sharedView{})
	co.fallback.Store(true) // until the first read of the shared state
	return co
}

func (co *coordinated) start() {
	ctx, cancel := context.WithCancel(context.Background())
	co.cancel = cancel
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		co.watch(ctx)
	}()
	go func() {
		defer close(co.done)
		co.writer(ctx)
		<-watched
	}()
}

func (co *coordinated) stop() {
	if co.cancel != nil {
		co.cancel()
		<-co.done
	}
}

func (co *coordinated) key(rel string) string { return co.dir + rel }

// healthy reports whether the cached view is fresh enough to decide calls: the store
// answered within StoreTimeout and no write failed since. It records the switches to and
// from the local fallback.
func (co *coordinated) healthy(now time.Time) bool {
	heard := co.lastHeard.Load()
	ok := heard != 0 && now.UnixNano()-heard <= int64(co.cfg.StoreTimeout) && co.writeErrAt.Load() < heard
	if co.fallback.Load() == ok { // the mode changes
		if co.fallback.CompareAndSwap(ok, !ok) && !ok {
			co.fallbacks.Add(1)
		}
	}
	return ok
}

// admit decides a call from the cached shared state.
func (co *coordinated) admit(now time.Time) (serviceTicket, bool) {
	v := co.view.Load()
	local := co.bs.svc
	if v.state == BreakerClosed {
		if local.State() != BreakerClosed {
			local.forceClose(now, "shared breaker is closed", false, 0)
		}
		t, ok := local.allow(now)
		return serviceTicket{local: t, shared: true}, ok
	}
	if local.State() == BreakerClosed {
		local.force(BreakerOpen, now, "shared breaker is open")
	}
	if p := co.mine.Load(); p != nil && v.probeHolder == co.cfg.CallerID && v.probeLease == p.lease &&
		co.probing.CompareAndSwap(false, true) {
		return serviceTicket{shared: true, sharedProbe: true}, true
	}
	if v.probeHolder == "" && now.UnixNano() >= co.acquireAfter.Load() {
		co.request(&co.wantAcquire)
	}
	return serviceTicket{}, false
}

// finish records the outcome of a call the shared breaker admitted.
func (co *coordinated) finish(st serviceTicket, now time.Time, o outcome, d time.Duration) {
	if !st.sharedProbe {
		if reason := co.bs.svc.observe(st.local, now, o, d); reason != "" {
			co.setReason(reason)
			co.request(&co.wantReport)
		}
		return
	}
	defer co.probing.Store(false)
	var result int32
	switch {
	case o == outcomeIgnored:
		return // the permit stays; the next call probes
	case o == outcomeFailure, d >= co.bcfg.SlowCallDuration:
		result = 2
	case co.probeOK.Add(1) >= int64(co.bcfg.HalfOpenSuccesses):
		result = 1
	default:
		return
	}
	// No further probe under this permit: its result is being written.
	var lease int64
	if p := co.mine.Swap(nil); p != nil {
		lease = p.lease
	}
	co.settleLease.Store(lease)
	co.probeResult.Store(result)
	co.kickWriter()
}

func (co *coordinated) setReason(r string) { co.lastReason.Store(&r) }

func (co *coordinated) request(flag *atomic.Bool) {
	if !flag.Load() && !flag.Swap(true) { // a load first: rejected calls do not all write
		co.kickWriter()
	}
}

func (co *coordinated) kickWriter() {
	select {
	case co.kick <- struct{}{}:
	default:
	}
}

// writer makes the breaker's writes, one at a time, each bounded by StoreTimeout.
func (co *coordinated) writer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-co.kick:
		}
		if r := co.probeResult.Swap(0); r != 0 {
			co.settle(ctx, r == 1)
		}
		if co.wantReport.Swap(false) {
			co.report(ctx)
		}
		if co.wantAcquire.Swap(false) {
			co.acquire(ctx)
		}
		co.maybeOpen(ctx)
	}
}

// write runs one store operation under StoreTimeout and counts it.
func (co *coordinated) write(ctx context.Context, n int, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, co.cfg.StoreTimeout)
	defer cancel()
	co.writes.Add(int64(n))
	err := op(ctx)
	if err != nil && ctx.Err() != context.Canceled {
		co.writeErrors.Add(1)
		co.writeErrAt.Store(co.c.now().UnixNano())
	}
	return err
}

func (co *coordinated) value(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func ttlSeconds(d time.Duration) int64 { return max(int64(math.Ceil(d.Seconds())), 1) }

// report publishes that this caller's breaker tripped, under a lease of ReportTTL.
func (co *coordinated) report(ctx context.Context) {
	reason := ""
	if p := co.lastReason.Load(); p != nil {
		reason = *p
	}
	val := co.value(ReportRecord{Caller: co.cfg.CallerID, Reason: reason, At: co.c.now().UTC()})
	_ = co.write(ctx, 2, func(ctx context.Context) error {
		lease, err := co.cli.Grant(ctx, ttlSeconds(co.cfg.ReportTTL))
		if err != nil {
			return err
		}
		_, err = co.cli.Put(ctx, co.key("reports/"+co.cfg.CallerID), val, clientv3.WithLease(lease.ID))
		return err
	})
}

// maybeOpen opens the shared breaker when a quorum of callers, this one among them, reports
// failure. Concurrent openers race on the state key's revision; one wins.
func (co *coordinated) maybeOpen(ctx context.Context) {
	v := co.view.Load()
	if v.state == BreakerOpen || !v.reports[co.cfg.CallerID] || len(v.reports) < co.cfg.Quorum {
		return
	}
	val := co.value(BreakerRecord{
		State: BreakerOpen.String(), OpenFor: Duration(co.bcfg.OpenDuration), By: co.cfg.CallerID, At: co.c.now().UTC(),
		Reason: fmt.Sprintf("%d callers reported failure (quorum %d)", len(v.reports), co.cfg.Quorum),
	})
	_ = co.write(ctx, 1, func(ctx context.Context) error {
		_, err := co.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(co.key("state")), "=", v.stateRev)).
			Then(clientv3.OpPut(co.key("state"), val)).Commit()
		return err
	})
}

// acquire tries to take the fleet's probe permit: a create-if-absent of the probe key under
// a fresh lease, guarded by the state the caller saw, so exactly one caller wins.
func (co *coordinated) acquire(ctx context.Context) {
	v := co.view.Load()
	if v.state != BreakerOpen || v.probeHolder != "" || co.mine.Load() != nil {
		return
	}
	val := co.value(ProbeRecord{Caller: co.cfg.CallerID, At: co.c.now().UTC()})
	_ = co.write(ctx, 2, func(ctx context.Context) error {
		lease, err := co.cli.Grant(ctx, ttlSeconds(co.cfg.ProbeLease))
		if err != nil {
			return err
		}
		resp, err := co.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(co.key("probe")), "=", 0),
				clientv3.Compare(clientv3.ModRevision(co.key("state")), "=", v.stateRev)).
			Then(clientv3.OpPut(co.key("probe"), val, clientv3.WithLease(lease.ID))).Commit()
		if err == nil && resp.Succeeded {
			co.probeOK.Store(0)
			co.mine.Store(&permit{lease: int64(lease.ID), rev: resp.Header.Revision,
				echoBy: co.c.now().Add(co.cfg.StoreTimeout).UnixNano()})
		}
		return err
	})
	// A loser tries again after another open period unless the winner's probe settles it.
	co.scheduleAcquire(co.c.now(), v.openFor)
}

// settle writes the outcome of this caller's probe: Closed (and the reports cleared) or Open
// again. The transaction holds only while the permit is still this caller's lease, so a
// caller that lost the permit (lease expired: slow, paused, skewed clock) changes nothing.
func (co *coordinated) settle(ctx context.Context, closeIt bool) {
	lease := co.settleLease.Swap(0)
	if lease == 0 {
		return
	}
	rec := BreakerRecord{State: "Closed", By: co.cfg.CallerID, Reason: "probe succeeded", At: co.c.now().UTC()}
	ops := []clientv3.Op{clientv3.OpDelete(co.key("probe"))}
	if closeIt {
		ops = append(ops, clientv3.OpDelete(co.key("reports/"), clientv3.WithPrefix()))
	} else {
		rec = BreakerRecord{State: BreakerOpen.String(), OpenFor: Duration(co.bcfg.OpenDuration), By: co.cfg.CallerID, Reason: "probe failed", At: rec.At}
	}
	ops = append(ops, clientv3.OpPut(co.key("state"), co.value(rec)))
	_ = co.write(ctx, 1, func(ctx context.Context) error {
		_, err := co.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.LeaseValue(co.key("probe")), "=", clientv3.LeaseID(lease))).
			Then(ops...).Commit()
		return err
	})
}

func (co *coordinated) scheduleAcquire(now time.Time, openFor time.Duration) {
	wait := time.Duration(float64(openFor) * (1 + co.bcfg.OpenJitter*co.c.rand()))
	co.acquireAfter.Store(now.Add(wait).UnixNano())
}

// watch keeps the view: a read of the breaker's keys, then a watch with progress requests
// every StoreTimeout/4; a silence of 2×StoreTimeout ends the session. Reconnects back off
// with full jitter.
func (co *coordinated) watch(ctx context.Context) {
	for attempt := 0; ; attempt++ {
		if co.session(ctx) {
			attempt = 0
		}
		if ctx.Err() != nil {
			return
		}
		t := time.NewTimer(fullJitter(co.c.cfg.BackoffBase, co.c.cfg.BackoffMax, attempt, co.c.rand()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (co *coordinated) session(ctx context.Context) (synced bool) {
	gctx, cancel := context.WithTimeout(ctx, co.cfg.StoreTimeout)
	resp, err := co.cli.Get(gctx, co.dir, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return false
	}
	rev := resp.Header.Revision
	co.load(resp.Kvs, rev)
	co.heard()
	wctx, wcancel := context.WithCancel(metadata.AppendToOutgoingContext(
		clientv3.WithRequireLeader(ctx), "registrar-discovery-breaker", co.c.id))
	defer wcancel()
	// From rev, not rev+1: the server answers progress requests only once the store has
	// reached a watch's start revision, and an idle store would look silent. The events at
	// rev, already listed, are skipped.
	wch := co.cli.Watch(wctx, co.dir, clientv3.WithPrefix(), clientv3.WithRev(rev))
	probe := time.NewTicker(max(co.cfg.StoreTimeout/4, 10*time.Millisecond))
	defer probe.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return true
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				return true
			}
			last = time.Now()
			if evs := after(wr.Events, rev); len(evs) > 0 {
				co.apply(evs)
			}
			co.heard()
		case <-probe.C:
			if time.Since(last) > 2*co.cfg.StoreTimeout || co.echoOverdue() {
				return true // list again
			}
			pctx, pcancel := context.WithTimeout(wctx, co.cfg.StoreTimeout/4)
			_ = co.cli.RequestProgress(pctx)
			pcancel()
		}
	}
}

// after is the events past revision rev.
func after(evs []*clientv3.Event, rev int64) []*clientv3.Event {
	for len(evs) > 0 && evs[0].Kv.ModRevision <= rev {
		evs = evs[1:]
	}
	return evs
}

func (co *coordinated) heard() {
	co.lastHeard.Store(co.c.now().UnixNano())
	co.kickWriter() // a quorum may have formed
}

// load replaces the view with the keys of a full read at revision rev.
func (co *coordinated) load(kvs []*mvccpb.KeyValue, rev int64) {
	old := co.view.Load()
	v := &sharedView{state: old.state, reports: map[string]bool{}}
	for _, kv := range kvs {
		co.put(v, kv)
	}
	if v.stateRev == 0 {
		v.state = BreakerClosed
	}
	co.publish(old, v)
	co.reconcile(v, rev)
}

// reconcile checks the caller's permit against a view that holds every change of the probe
// key up to revision rev: when rev is at or after the acquire, the store either shows the
// permit (the caller holds it) or not (it is gone: expired, settled, or never seen by the
// watch and expired since), and the caller lets it go and may acquire again.
func (co *coordinated) reconcile(v *sharedView, rev int64) {
	p := co.mine.Load()
	if p == nil || rev < p.rev || (v.probeHolder == co.cfg.CallerID && v.probeLease == p.lease) {
		return
	}
	co.mine.CompareAndSwap(p, nil)
}

// echoOverdue reports whether the caller took a permit its view has not shown within
// StoreTimeout: the watch may have missed it, and a new listing settles it (reconcile).
func (co *coordinated) echoOverdue() bool {
	p := co.mine.Load()
	if p == nil || co.c.now().UnixNano() < p.echoBy {
		return false
	}
	v := co.view.Load()
	return v.probeHolder != co.cfg.CallerID || v.probeLease != p.lease
}

// apply copies the view and applies events.
func (co *coordinated) apply(events []*clientv3.Event) {
	old := co.view.Load()
	v := *old
	v.reports = make(map[string]bool, len(old.reports))
	for k := range old.reports {
		v.reports[k] = true
	}
	var probeRev int64 // the revision of the last change of the probe key in events
	for _, ev := range events {
		if string(ev.Kv.Key) == co.dir+"probe" {
			probeRev = ev.Kv.ModRevision
		}
		if ev.Type == mvccpb.DELETE {
			switch rel := strings.TrimPrefix(string(ev.Kv.Key), co.dir); {
			case rel == "state":
				v.state, v.stateRev, v.openFor = BreakerClosed, 0, 0
			case rel == "probe":
				v.probeHolder, v.probeLease = "", 0
			case strings.HasPrefix(rel, "reports/"):
				delete(v.reports, strings.TrimPrefix(rel, "reports/"))
			}
			continue
		}
		co.put(&v, ev.Kv)
	}
	co.publish(old, &v)
	if probeRev != 0 {
		co.reconcile(&v, probeRev)
	}
}

// put applies one key. A value that does not decode is counted and changes nothing but
// the revision the next transaction compares against.
func (co *coordinated) put(v *sharedView, kv *mvccpb.KeyValue) {
	switch rel := strings.TrimPrefix(string(kv.Key), co.dir); {
	case rel == "state":
		v.stateRev = kv.ModRevision
		rec, err := DecodeBreakerRecord(kv.Value)
		if err != nil {
			co.undecodable.Add(1)
			return
		}
		v.state, v.openFor = BreakerClosed, 0
		if rec.State == BreakerOpen.String() {
			v.state, v.openFor = BreakerOpen, time.Duration(rec.OpenFor)
		}
	case rel == "probe":
		var rec ProbeRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.Caller == "" {
			co.undecodable.Add(1)
			rec.Caller = "?" // the key exists, so the permit is taken
		}
		v.probeHolder, v.probeLease = rec.Caller, kv.Lease
	case strings.HasPrefix(rel, "reports/"):
		var rec ReportRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			co.undecodable.Add(1)
			return
		}
		v.reports[strings.TrimPrefix(rel, "reports/")] = true
	}
}

// publish stores v and mirrors a change of the shared state into the local breaker, so a
// fallback to local starts from what the fleet saw.
func (co *coordinated) publish(old, v *sharedView) {
	co.view.Store(v)
	now := co.c.now()
	if v.state == BreakerOpen && (old.state != BreakerOpen || old.stateRev != v.stateRev) {
		co.scheduleAcquire(now, v.openFor)
		co.bs.svc.force(BreakerOpen, now, "shared breaker opened")
	}
	if v.state == BreakerClosed && old.state == BreakerOpen {
		// The fleet returns spread out, as independent breakers would, not at once.
		delay := time.Duration(co.c.rand() * float64(co.cfg.ReturnSpread))
		co.bs.svc.forceClose(now, "shared breaker closed", true, delay)
	}
}

func (co *coordinated) stats(now time.Time) CoordinatedStats {
	v := co.view.Load()
	return CoordinatedStats{
		Shared: v.state, Fallback: !co.healthy(now),
		Fallbacks: co.fallbacks.Load(), Undecodable: co.undecodable.Load(),
		StoreWrites: co.writes.Load(), StoreErrors: co.writeErrors.Load(),
		Reports: len(v.reports), ProbeHolder: v.probeHolder,
	}
}
