package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/internal/store"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
)

// The fault recorder: every test watches the whole keyspace of its store with a client of its
// own, from the revision of its seeding on, and checks the invariants below over what it saw
// and over the store's final state (see docs/reliability.md).
//
// What the recorder guarantees about itself (a recorder that can miss an event can miss a
// violation):
//   - No gaps. The watch covers every key, so it must see every revision after the start
//     (etcd bumps the revision once per write transaction). A broken watch is resumed from the
//     next revision; a revision it never saw (compaction, a resume that skipped) is a
//     violation, and so is not having caught up with the store's revision at the end.
//   - Honest timestamps. An event delivered by a live watch is stamped with the time it was
//     observed. A resumed watch first replays what happened while it was broken: those events
//     are not stamped at replay time but with the interval they can have happened in — after
//     the last live observation before the break, and no later than the moment a read showed
//     the store at or past their revision. A check whose verdict depends on where in that
//     interval the event happened counts as violated.
//   - Its view is the store's view. The start state plus every recorded event must give
//     exactly the keys and values the store holds at the end.

// storeEvent is one event of the store as the recorder's watches saw it.
type storeEvent struct {
	// at is when a watch observed the event live; for a replayed event, the latest time it
	// can have happened.
	at time.Time
	// notBefore is the earliest time the event can have happened: at for a live event.
	notBefore time.Time
	replayed  bool
	put       bool
	key       string
	value     string
	rev       int64
}

// when describes the event's time for messages.
func (ev storeEvent) when() string {
	if !ev.replayed {
		return "observed live at " + ev.at.Format("15:04:05.000")
	}
	return fmt.Sprintf("replayed after a broken or silent watch: happened between %s and %s",
		ev.notBefore.Format("15:04:05.000"), ev.at.Format("15:04:05.000"))
}

// rawEvent is one event as a watch delivers it.
type rawEvent struct {
	put   bool
	key   string
	value string
	rev   int64
}

// inFlight is how long after a pod became ineligible a put for it that neither re-creates
// its key nor lies beyond the bound is tolerated: the operator acted on a view of the pod a
// moment old (an update of a key still present, or the first registration of a pod whose
// readiness was lost while it was being written). Re-creating a deleted key is never
// tolerated.
const inFlight = time.Second

const (
	// progressEvery is how often record asks each watch for a progress notification, so that
	// a live watch is never silent for long; silenceLimit is the silence after which the
	// events that end it count as replays (the etcd client resumes a broken watch by itself
	// and then delivers what it missed as if live).
	progressEvery = 200 * time.Millisecond
	silenceLimit  = 3 * time.Second
)

// watchSource is one watch's state: record runs one per store member, so that a member's
// loss leaves the others watching live.
type watchSource struct {
	next int64 // the next revision this watch must deliver
	// lastHeard is when the watch last delivered anything (progress included); replay*
	// describe a restarted watch's replay: revisions up to replayRev happened in
	// [replayFrom, replayTo].
	lastHeard  time.Time
	replayRev  int64
	replayFrom time.Time
	replayTo   time.Time
}

// recorder is what the watches saw, fed by record (or by a unit test's synthetic stream)
// through watching, deliver, heard and broken (source 0) or their *From forms.
type recorder struct {
	mu sync.Mutex
	// initial is the keyspace at startRev.
	initial  map[string]string
	startRev int64
	sources  map[int]*watchSource
	// byRev holds every revision's events as first recorded (or improved by a live delivery
	// from another watch).
	byRev map[int64][]storeEvent
	// errs are the watch errors the recorder resumed from (for the log); problems are the
	// recorder's own failures: compactions.
	errs     []string
	problems []string
	// quietRev and quietUntil: the test declared that the store could not commit between a
	// moment when it was at revision quietRev and quietUntil (it was stopped, or had lost its
	// quorum), so revisions after quietRev happened after quietUntil.
	quiet []quietSpell
}

type quietSpell struct {
	rev   int64
	until time.Time
}

// newRecorder starts a record of the keyspace initial, read at revision startRev at time at.
func newRecorder(startRev int64, initial map[string]string, at time.Time) *recorder {
	r := &recorder{initial: initial, startRev: startRev, sources: map[int]*watchSource{}, byRev: map[int64][]storeEvent{}}
	r.source(0, at)
	return r
}

func (r *recorder) source(i int, at time.Time) *watchSource {
	s := r.sources[i]
	if s == nil {
		s = &watchSource{next: r.startRev + 1, lastHeard: at}
		r.sources[i] = s
	}
	return s
}

// resumeFrom is the revision source i's (re)started watch must start at.
func (r *recorder) resumeFrom(i int) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.source(i, time.Now()).next
}

func (r *recorder) watching(storeRev int64, at time.Time) { r.watchingFrom(0, storeRev, at) }

// watchingFrom: source i starts a watch from resumeFrom(i), and a read answered at time at
// said the store was at revision storeRev. Events up to storeRev that the new watch delivers
// happened before at, and after the watch last heard from the store: they are replays.
func (r *recorder) watchingFrom(i int, storeRev int64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.source(i, at)
	s.replayRev, s.replayFrom, s.replayTo = storeRev, s.lastHeard, at
	s.lastHeard = at
}

func (r *recorder) heard(at time.Time) { r.heardFrom(0, at) }

// heardFrom records that source i heard from the store at time at (a progress notification).
func (r *recorder) heardFrom(i int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.source(i, at).lastHeard = at
}

func (r *recorder) deliver(at time.Time, evs []rawEvent) { r.deliverFrom(0, at, evs) }

// deliverFrom records events source i's watch delivered at time at.
func (r *recorder) deliverFrom(i int, at time.Time, evs []rawEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.source(i, at)
	var batch []storeEvent
	flush := func() {
		if len(batch) == 0 {
			return
		}
		rev := batch[0].rev
		if cur, ok := r.byRev[rev]; !ok || (cur[0].replayed && !batch[0].replayed) {
			r.byRev[rev] = batch
		}
		batch = nil
	}
	for _, e := range evs {
		if e.rev < s.next-1 || (len(batch) == 0 && e.rev == s.next-1) {
			continue // this watch delivered it already
		}
		if len(batch) > 0 && batch[0].rev != e.rev {
			flush()
		}
		ev := storeEvent{at: at, notBefore: at, put: e.put, key: e.key, value: e.value, rev: e.rev}
		switch {
		case e.rev <= s.replayRev:
			ev.replayed, ev.notBefore, ev.at = true, s.replayFrom, s.replayTo
		case at.Sub(s.lastHeard) > silenceLimit:
			ev.replayed, ev.notBefore = true, s.lastHeard
		}
		if ev.replayed {
			for _, q := range r.quiet {
				if e.rev > q.rev && ev.notBefore.Before(q.until) {
					ev.notBefore = q.until
				}
			}
			if ev.notBefore.After(ev.at) {
				ev.notBefore = ev.at
			}
		}
		batch = append(batch, ev)
		s.next = e.rev + 1
	}
	flush()
	s.lastHeard = at
}

func (r *recorder) broken(err error, compactRev int64, at time.Time) {
	r.brokenFrom(0, err, compactRev, at)
}

// brokenFrom records that source i's watch ended with err at time at; compactRev > 0 is
// the compaction revision a compacted watch reported: what lies before it is lost to it.
func (r *recorder) brokenFrom(i int, err error, compactRev int64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.source(i, at)
	r.errs = append(r.errs, fmt.Sprintf("watch %d at %s: %v", i, at.Format("15:04:05.000"), err))
	if compactRev > s.next {
		r.problems = append(r.problems, fmt.Sprintf("recorder: watch %d compacted at revision %d: revisions %d..%d lost to it", i, compactRev, s.next, compactRev-1))
		s.next = compactRev
	} else if compactRev > 0 || errors.Is(err, rpctypes.ErrCompacted) {
		r.problems = append(r.problems, fmt.Sprintf("recorder: watch %d compacted (%v)", i, err))
	}
}

// quietSince declares that the store could not commit from a moment when it was at
// revision rev until until: every revision after rev happened after until.
func (r *recorder) quietSince(rev int64, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.quiet = append(r.quiet, quietSpell{rev: rev, until: until})
	for _, evs := range r.byRev {
		for j := range evs {
			if evs[j].replayed && evs[j].rev > rev && evs[j].notBefore.Before(until) {
				evs[j].notBefore = until
				if until.After(evs[j].at) {
					evs[j].notBefore = evs[j].at
				}
			}
		}
	}
}

// seenThrough is the last revision up to which the record has every revision.
func (r *recorder) seenThrough() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	rev := r.startRev
	for {
		if _, ok := r.byRev[rev+1]; !ok {
			return rev
		}
		rev++
	}
}

func (r *recorder) snapshot() []storeEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	revs := slices.Sorted(maps.Keys(r.byRev))
	var out []storeEvent
	for _, rev := range revs {
		out = append(out, r.byRev[rev]...)
	}
	return out
}

func (r *recorder) watchErrors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// selfCheck returns the recorder's own violations, given the store's whole keyspace final at
// revision finalRev: compactions, revisions no watch delivered (gaps), and a replay of the
// record over the start state that differs from final.
func (r *recorder) selfCheck(finalRev int64, final map[string]string) []string {
	r.mu.Lock()
	v := slices.Clone(r.problems)
	var missing []int64
	for rev := r.startRev + 1; rev <= finalRev; rev++ {
		if _, ok := r.byRev[rev]; !ok {
			missing = append(missing, rev)
		}
	}
	r.mu.Unlock()
	if len(missing) > 0 {
		v = append(v, fmt.Sprintf("recorder: revisions %v of %d..%d never delivered by any watch (a gap in the record; the store is at %d)",
			missing, r.startRev+1, finalRev, finalRev))
		return v
	}
	state := maps.Clone(r.initial)
	if state == nil {
		state = map[string]string{}
	}
	for _, ev := range r.snapshot() {
		if ev.rev > finalRev {
			break
		}
		if ev.put {
			state[ev.key] = ev.value
		} else {
			delete(state, ev.key)
		}
	}
	keys := slices.Sorted(maps.Keys(state))
	for k := range final {
		if _, ok := state[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		got, inStore := final[k]
		want, inRecord := state[k]
		if got != want || inStore != inRecord {
			v = append(v, fmt.Sprintf("recorder: at revision %d the store holds %s=%q (present %v), the record says %q (present %v)",
				finalRev, k, got, inStore, want, inRecord))
		}
	}
	return v
}

// pause waits until the record has every revision up to the store's current one and
// returns that revision: call it just before a fault that stops the store from committing
// (stopping it, taking its quorum), and recorder.quietSince(rev, t) with t taken just
// before the store can commit again.
func (r *recorder) pause(ctx context.Context, cli *clientv3.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	for r.seenThrough() < resp.Header.Revision {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the record did not reach revision %d: %w", resp.Header.Revision, ctx.Err())
		case <-time.After(10 * time.Millisecond): // polling with a deadline
		}
	}
	return resp.Header.Revision, nil
}

// record starts watching all keys after revision rev (the seeding's), one watch per store
// member (each with a client of its own), until the test ends.
func record(t *testing.T, cli *clientv3.Client, rev int64) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, initial, err := readAll(ctx, cli, rev)
	if err != nil {
		t.Fatalf("recorder: read the store at revision %d: %v", rev, err)
	}
	r := newRecorder(rev, initial, time.Now())
	for i, ep := range cli.Endpoints() {
		mc, err := etcdclient.New(etcdclient.Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("recorder: client of %s: %v", ep, err)
		}
		t.Cleanup(func() { _ = mc.Close() })
		go r.watch(ctx, i, mc)
	}
	return r
}

// watch runs source i's watch on mc, resuming it whenever it ends, until ctx is done.
func (r *recorder) watch(ctx context.Context, i int, mc *clientv3.Client) {
	for ctx.Err() == nil {
		// Where the store is now: what the new watch delivers up to this revision is a replay.
		hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := mc.Get(hctx, "\x00", clientv3.WithCountOnly())
		hcancel()
		if err == nil {
			r.watchingFrom(i, resp.Header.Revision, time.Now())
			wctx, wcancel := context.WithCancel(ctx)
			wch := mc.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(r.resumeFrom(i)))
			go func() { // keep hearing from a live watch; see progressEvery
				tick := time.NewTicker(progressEvery)
				defer tick.Stop()
				for {
					select {
					case <-wctx.Done():
						return
					case <-tick.C:
						pctx, pcancel := context.WithTimeout(wctx, time.Second)
						_ = mc.RequestProgress(pctx)
						pcancel()
					}
				}
			}()
			for resp := range wch {
				if err := resp.Err(); err != nil {
					r.brokenFrom(i, err, resp.CompactRevision, time.Now())
					break
				}
				now := time.Now()
				if resp.IsProgressNotify() {
					r.heardFrom(i, now)
					continue
				}
				evs := make([]rawEvent, 0, len(resp.Events))
				for _, ev := range resp.Events {
					evs = append(evs, rawEvent{put: ev.Type == mvccpb.PUT, key: string(ev.Kv.Key), value: string(ev.Kv.Value), rev: ev.Kv.ModRevision})
				}
				r.deliverFrom(i, now, evs)
			}
			wcancel()
			if ctx.Err() == nil {
				r.brokenFrom(i, errors.New("watch channel closed"), 0, time.Now())
			}
		} else if ctx.Err() == nil {
			r.brokenFrom(i, fmt.Errorf("read the store's revision before resuming: %w", err), 0, time.Now())
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // re-watch pacing after a broken watch
		}
	}
}

// readAll reads the whole keyspace at rev (0: now) and returns the revision it was read at.
func readAll(ctx context.Context, cli *clientv3.Client, rev int64) (int64, map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithFromKey()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := cli.Get(ctx, "\x00", opts...)
	if err != nil {
		return 0, nil, err
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return resp.Header.Revision, out, nil
}

// podLife is when the test made a pod eligible and ineligible (zero: not yet).
type podLife struct {
	uid                      string
	eligibleAt, ineligibleAt time.Time
}

// world is what the test did to pods: the ground truth the store is checked against.
type world struct {
	mu   sync.Mutex
	pods map[string]*podLife
}

func newWorld() *world { return &world{pods: map[string]*podLife{}} }

// eligible records that pod becomes eligible now (called just before the status write).
func (w *world) eligible(pod, uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pods[pod] = &podLife{uid: uid, eligibleAt: time.Now()}
}

// ineligible records that pod stops being eligible now (called just before the write).
func (w *world) ineligible(pod string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p := w.pods[pod]; p != nil && p.ineligibleAt.IsZero() {
		p.ineligibleAt = time.Now()
	}
}

// desired is the sorted names of the pods eligible now.
func (w *world) desired() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for name, p := range w.pods {
		if p.ineligibleAt.IsZero() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (w *world) get(pod string) (podLife, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pods[pod]
	if !ok {
		return podLife{}, false
	}
	return *p, true
}

// checks is what a test's invariants are checked against.
type checks struct {
	world *world
	// servicePrefix is {prefix}/{service}/{namespace}/: the keys the operator owns there.
	servicePrefix string
	// ownedPrefix holds keys the operator may write besides endpoints (its fence).
	ownedPrefix string
	// alsoOwned are other services' prefixes the test lets the operator write.
	alsoOwned []string
	owner     string
	// service and ports are what the endpoints' values must say (with the pod's name, UID,
	// namespace, IP and node from the API server and owner above).
	service string
	ports   map[string]int32
	// namespace holds the test's pods; the final check reads them from the API server.
	namespace string
	// foreign are keys (and their values) seeded for someone else: never to be touched.
	foreign map[string]string
	// window is the bounded time after a pod became ineligible (at) by which its endpoint
	// must be gone; the test states it.
	window func(at time.Time) time.Time
	// expiryAllowed, when set, says whether an eligible pod's endpoint may be deleted at a
	// time (the lease backstop expiring it while no operator runs).
	expiryAllowed func(at time.Time) bool
}

// verify waits until the recorder has seen the store's current revision, then checks the
// invariants over the record, the store's final state and the pods the API server holds; it
// returns the violations.
func (c checks) verify(ctx context.Context, cli *clientv3.Client, rec *recorder) []string {
	finalRev, final, err := readAll(ctx, cli, 0)
	if err != nil {
		return []string{fmt.Sprintf("read the final store: %v", err)}
	}
	deadline := time.Now().Add(10 * time.Second)
	for rec.seenThrough() < finalRev && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling with a deadline: the recorder's watch catching up
	}
	var pods map[string]corev1.Pod
	if c.namespace != "" {
		pods, err = apiPods(ctx, c.namespace)
		if err != nil {
			return []string{fmt.Sprintf("read the pods from the API server: %v", err)}
		}
	}
	return c.judge(rec, finalRev, final, pods, time.Now())
}

// apiPods lists the pods of ns from the API server, by name.
func apiPods(ctx context.Context, ns string) (map[string]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var list corev1.PodList
	var err error
	for ctx.Err() == nil { // the API server may be restarting
		if err = k8s.List(ctx, &list, client.InNamespace(ns)); err == nil {
			out := make(map[string]corev1.Pod, len(list.Items))
			for _, p := range list.Items {
				out[p.Name] = p
			}
			return out, nil
		}
		time.Sleep(200 * time.Millisecond) // retry pacing against an unavailable API server
	}
	return nil, err
}

// judge checks the invariants: the recorder's own (no gaps, its view equals the store's),
// per event (a, c), the windows (a), and the final state (b, c) against final (the whole
// keyspace at finalRev) and pods (the API server's pods by name; nil skips the value check).
func (c checks) judge(rec *recorder, finalRev int64, final map[string]string, pods map[string]corev1.Pod, now time.Time) []string {
	v := rec.selfCheck(finalRev, final)
	events := rec.snapshot()
	byKey := map[string][]storeEvent{}
	for _, ev := range events {
		prev := byKey[ev.key]
		byKey[ev.key] = append(prev, ev)
		v = append(v, c.checkEvent(ev, prev, rec.initial)...)
	}
	v = append(v, c.checkWindows(byKey, rec.initial, now)...)
	return append(v, c.checkFinal(final, pods)...)
}

// owned reports whether the operator may write key besides the service's endpoints.
func (c checks) owned(key string) bool {
	if c.ownedPrefix != "" && strings.HasPrefix(key, c.ownedPrefix) {
		return true
	}
	for _, p := range c.alsoOwned {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// checkEvent: (c) nothing foreign or outside the operator's keys is touched; (a) no endpoint
// is written for a pod after it became ineligible (the messages tell a write beyond the
// window and a re-creation, a resurrection, apart); no endpoint is deleted while its pod is
// eligible. prev are the
// key's earlier events, initial the keyspace when recording began.
func (c checks) checkEvent(ev storeEvent, prev []storeEvent, initial map[string]string) []string {
	if _, ok := c.foreign[ev.key]; ok {
		return []string{fmt.Sprintf("(c) foreign key %s touched (rev %d, %s)", ev.key, ev.rev, ev.when())}
	}
	if c.owned(ev.key) {
		return nil
	}
	if !strings.HasPrefix(ev.key, c.servicePrefix) {
		return []string{fmt.Sprintf("(c) key %s outside the operator's keys touched (rev %d)", ev.key, ev.rev)}
	}
	pod := path.Base(ev.key)
	life, known := c.world.get(pod)
	if !known {
		return []string{fmt.Sprintf("(a) %s written for a pod the test never made eligible (rev %d)", ev.key, ev.rev)}
	}
	ineligible := !life.ineligibleAt.IsZero()
	var v []string
	if ev.put {
		_, existedAtStart := initial[ev.key]
		existed := existedAtStart || len(prev) > 0
		absent := (len(prev) == 0 && !existedAtStart) || (len(prev) > 0 && !prev[len(prev)-1].put)
		switch {
		case ineligible && ev.at.After(c.window(life.ineligibleAt)):
			v = append(v, fmt.Sprintf("(a) %s written %s after its pod became ineligible, beyond the bound %s (rev %d, %s)",
				ev.key, ev.at.Sub(life.ineligibleAt).Round(time.Millisecond), c.window(life.ineligibleAt).Sub(life.ineligibleAt).Round(time.Millisecond), ev.rev, ev.when()))
		case ineligible && ev.at.After(life.ineligibleAt) && existed && absent:
			v = append(v, fmt.Sprintf("(a) %s re-created %s after its pod became ineligible and its endpoint was deleted: resurrected (rev %d, %s)",
				ev.key, ev.at.Sub(life.ineligibleAt).Round(time.Millisecond), ev.rev, ev.when()))
		case ineligible && ev.at.After(life.ineligibleAt.Add(inFlight)):
			v = append(v, fmt.Sprintf("(a) %s written %s after its pod became ineligible (rev %d, %s)",
				ev.key, ev.at.Sub(life.ineligibleAt).Round(time.Millisecond), ev.rev, ev.when()))
		}
		var ep store.Endpoint
		if err := json.Unmarshal([]byte(ev.value), &ep); err != nil || ep.Owner != c.owner || ep.UID != life.uid {
			v = append(v, fmt.Sprintf("%s written with owner %q uid %q, want %q %q (rev %d)", ev.key, ep.Owner, ep.UID, c.owner, life.uid, ev.rev))
		}
		return v
	}
	// A delete: the pod must certainly have been ineligible by then (or the test allows an
	// expiry over the whole interval the event can have happened in).
	if !ineligible || ev.notBefore.Before(life.ineligibleAt) {
		if c.expiryAllowed == nil || !c.expiryAllowed(ev.notBefore) || !c.expiryAllowed(ev.at) {
			v = append(v, fmt.Sprintf("eligible pod's endpoint %s deleted (rev %d, %s)", ev.key, ev.rev, ev.when()))
		}
	}
	return v
}

// checkWindows: (a) every ineligible pod's endpoint is gone by the end of its window, counting
// only the events certainly before the deadline (a replayed delete that may have come later
// does not count).
func (c checks) checkWindows(byKey map[string][]storeEvent, initial map[string]string, now time.Time) []string {
	var v []string
	for key, evs := range byKey {
		if !strings.HasPrefix(key, c.servicePrefix) || c.owned(key) {
			continue
		}
		if _, ok := c.foreign[key]; ok {
			continue
		}
		life, ok := c.world.get(path.Base(key))
		if !ok || life.ineligibleAt.IsZero() {
			continue
		}
		deadline := c.window(life.ineligibleAt)
		if now.Before(deadline) {
			continue // the final-state check covers it
		}
		_, present := initial[key]
		for _, ev := range evs {
			if ev.at.After(deadline) {
				break
			}
			present = ev.put
		}
		if present {
			v = append(v, fmt.Sprintf("(a) %s still present %s after its pod became ineligible",
				key, deadline.Sub(life.ineligibleAt).Round(time.Millisecond)))
		}
	}
	return v
}

// checkFinal: (b) the store holds exactly the eligible pods, each with the value the API
// server's pod and the registry give (service, namespace, pod, UID, address, ports, node,
// owner), and (c) foreign keys keep their values.
func (c checks) checkFinal(final map[string]string, pods map[string]corev1.Pod) []string {
	var v []string
	got := []string{}
	for key, value := range final {
		if !strings.HasPrefix(key, c.servicePrefix) || c.owned(key) {
			continue
		}
		if _, ok := c.foreign[key]; ok {
			continue
		}
		name := path.Base(key)
		got = append(got, name)
		if pods == nil {
			continue
		}
		pod, ok := pods[name]
		if !ok {
			v = append(v, fmt.Sprintf("(b) %s is in the store but the API server has no pod %s", key, name))
			continue
		}
		if d := c.valueDiff(value, &pod); d != "" {
			v = append(v, fmt.Sprintf("(b) %s holds %s", key, d))
		}
	}
	sort.Strings(got)
	if want := c.world.desired(); !slices.Equal(got, want) {
		v = append(v, fmt.Sprintf("(b) store holds %v, eligible pods are %v", got, want))
	}
	for key, want := range c.foreign {
		if got, ok := final[key]; !ok || got != want {
			v = append(v, fmt.Sprintf("(c) foreign key %s changed or gone", key))
		}
	}
	return v
}

// valueDiff compares a stored endpoint value with what pod and the registry say it must be;
// "" when they agree.
func (c checks) valueDiff(value string, pod *corev1.Pod) string {
	var got store.Endpoint
	if err := json.Unmarshal([]byte(value), &got); err != nil {
		return fmt.Sprintf("a value that is not an endpoint (%v): %q", err, value)
	}
	want := store.Endpoint{Service: c.service, Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID),
		Address: pod.Status.PodIP, Ports: c.ports, Node: pod.Spec.NodeName, Owner: c.owner}
	cmp := got
	cmp.Zone, cmp.Cluster, cmp.RegisteredAt = "", "", time.Time{} // not derived from the pod
	if len(cmp.Ports) == 0 && len(want.Ports) == 0 {
		cmp.Ports = want.Ports
	}
	if cmp.Service != want.Service || cmp.Namespace != want.Namespace || cmp.Pod != want.Pod || cmp.UID != want.UID ||
		cmp.Address != want.Address || !maps.Equal(cmp.Ports, want.Ports) || cmp.Node != want.Node || cmp.Owner != want.Owner {
		return fmt.Sprintf("%+v, the API server's pod says %+v", cmp, want)
	}
	return ""
}

// servicePods lists the pod names under prefix, leaving out the foreign keys.
func servicePods(ctx context.Context, cli *clientv3.Client, prefix string, foreign map[string]string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, kv := range resp.Kvs {
		if _, ok := foreign[string(kv.Key)]; !ok {
			out = append(out, path.Base(string(kv.Key)))
		}
	}
	sort.Strings(out)
	return out, nil
}
