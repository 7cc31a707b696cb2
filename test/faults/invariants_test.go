package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/store"
)

// storeEvent is one event of the store as the recorder's watch saw it.
type storeEvent struct {
	at    time.Time
	put   bool
	key   string
	value string
	rev   int64
}

// recorder watches every key of a store from a revision on, with its own client.
type recorder struct {
	mu     sync.Mutex
	events []storeEvent
	errs   []string
}

// record starts watching all keys after revision rev (the seeding's); it runs until the
// test ends.
func record(t *testing.T, cli *clientv3.Client, rev int64) *recorder {
	t.Helper()
	r := &recorder{}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	t.Cleanup(cancel)
	go func() {
		from := rev + 1
		for ctx.Err() == nil {
			// A member loss or outage ends the watch; resume from the next revision.
			for resp := range cli.Watch(ctx, "/", clientv3.WithPrefix(), clientv3.WithRev(from)) {
				if err := resp.Err(); err != nil {
					r.note(fmt.Sprintf("watch: %v", err))
					break
				}
				now := time.Now()
				r.mu.Lock()
				for _, ev := range resp.Events {
					r.events = append(r.events, storeEvent{at: now, put: ev.Type == mvccpb.PUT,
						key: string(ev.Kv.Key), value: string(ev.Kv.Value), rev: ev.Kv.ModRevision})
					from = ev.Kv.ModRevision + 1
				}
				r.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // re-watch pacing after a broken watch
			}
		}
	}()
	return r
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, s)
}

func (r *recorder) snapshot() []storeEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
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
	// foreign are keys (and their values) seeded for someone else: never to be touched.
	foreign map[string]string
	// window is the bounded time after a pod became ineligible (at) by which its endpoint
	// must be gone; the test states it.
	window func(at time.Time) time.Time
	// expiryAllowed, when set, says whether an eligible pod's endpoint may be deleted at a
	// time (the lease backstop expiring it while no operator runs).
	expiryAllowed func(at time.Time) bool
}

// verify checks invariants (a), (b) and (c) over the recorded events and the store's final
// state; it returns the violations.
func (c checks) verify(ctx context.Context, cli *clientv3.Client, events []storeEvent) []string {
	var v []string
	byKey := map[string][]storeEvent{}
	for _, ev := range events {
		byKey[ev.key] = append(byKey[ev.key], ev)
		v = append(v, c.checkEvent(ev)...)
	}
	v = append(v, c.checkWindows(byKey)...)
	return append(v, c.checkFinal(ctx, cli)...)
}

// checkEvent: (c) nothing foreign or outside the operator's keys is touched; no endpoint is
// written for a pod that is not eligible, nor deleted while its pod is.
func (c checks) checkEvent(ev storeEvent) []string {
	if _, ok := c.foreign[ev.key]; ok {
		return []string{fmt.Sprintf("(c) foreign key %s touched (rev %d)", ev.key, ev.rev)}
	}
	if c.ownedPrefix != "" && strings.HasPrefix(ev.key, c.ownedPrefix) {
		return nil
	}
	for _, p := range c.alsoOwned {
		if strings.HasPrefix(ev.key, p) {
			return nil
		}
	}
	if !strings.HasPrefix(ev.key, c.servicePrefix) {
		return []string{fmt.Sprintf("(c) key %s outside the operator's keys touched (rev %d)", ev.key, ev.rev)}
	}
	pod := path.Base(ev.key)
	life, known := c.world.get(pod)
	switch {
	case !known:
		return []string{fmt.Sprintf("(a) %s written for a pod the test never made eligible", ev.key)}
	case ev.put && !life.ineligibleAt.IsZero() && ev.at.After(c.window(life.ineligibleAt)):
		return []string{fmt.Sprintf("(a) %s written %s after its pod became ineligible", ev.key, ev.at.Sub(life.ineligibleAt))}
	case !ev.put && (life.ineligibleAt.IsZero() || ev.at.Before(life.ineligibleAt)) &&
		(c.expiryAllowed == nil || !c.expiryAllowed(ev.at)):
		return []string{fmt.Sprintf("eligible pod's endpoint %s deleted (rev %d)", ev.key, ev.rev)}
	}
	if ev.put {
		var ep store.Endpoint
		if err := json.Unmarshal([]byte(ev.value), &ep); err != nil || ep.Owner != c.owner || ep.UID != life.uid {
			return []string{fmt.Sprintf("%s written with owner %q uid %q, want %q %q", ev.key, ep.Owner, ep.UID, c.owner, life.uid)}
		}
	}
	return nil
}

// checkWindows: (a) every ineligible pod's endpoint is gone by the end of its window.
func (c checks) checkWindows(byKey map[string][]storeEvent) []string {
	var v []string
	for key, evs := range byKey {
		if !strings.HasPrefix(key, c.servicePrefix) {
			continue
		}
		life, ok := c.world.get(path.Base(key))
		if !ok || life.ineligibleAt.IsZero() {
			continue
		}
		deadline := c.window(life.ineligibleAt)
		if time.Now().Before(deadline) {
			continue // the final-state check covers it
		}
		present := false
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

// checkFinal: (b) the store holds exactly the eligible pods, and (c) foreign keys keep
// their values.
func (c checks) checkFinal(ctx context.Context, cli *clientv3.Client) []string {
	var v []string
	got, err := servicePods(ctx, cli, c.servicePrefix, c.foreign)
	if err != nil {
		return []string{fmt.Sprintf("read final store: %v", err)}
	}
	if want := c.world.desired(); !slices.Equal(got, want) {
		v = append(v, fmt.Sprintf("(b) store holds %v, eligible pods are %v", got, want))
	}
	for key, want := range c.foreign {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			v = append(v, fmt.Sprintf("read %s: %v", key, err))
		} else if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			v = append(v, fmt.Sprintf("(c) foreign key %s changed or gone", key))
		}
	}
	return v
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
