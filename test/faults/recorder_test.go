package faults

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/store"
)

// Unit tests of the fault recorder itself, fed synthetic watch streams (no store, no API
// server): each history below hides a violation that a recorder must not miss, except the
// clean one, which must pass.

const (
	tPrefix = "/r/web/ns/"
	tOwner  = "reg-uid"
)

var t0 = time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func testChecks(w *world) checks {
	return checks{
		world: w, servicePrefix: tPrefix, ownedPrefix: "/r/fence/", owner: tOwner,
		service: "web", ports: map[string]int32{"http": 8080}, namespace: "ns",
		foreign: map[string]string{tPrefix + "foreign": "theirs"},
		window:  func(t time.Time) time.Time { return t.Add(15 * time.Second) },
	}
}

// testWorld has pods web-1..web-n, eligible from t0+1s and (when given) ineligible at the
// given offsets.
func testWorld(ineligible map[string]time.Duration, names ...string) *world {
	w := newWorld()
	for _, n := range names {
		p := &podLife{uid: "uid-" + n, eligibleAt: at(time.Second)}
		if d, ok := ineligible[n]; ok {
			p.ineligibleAt = at(d)
		}
		w.pods[n] = p
	}
	return w
}

func podOf(name, ip string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Status:     corev1.PodStatus{PodIP: ip},
	}
}

func endpointValue(name, ip string) string {
	b, _ := json.Marshal(store.Endpoint{Service: "web", Namespace: "ns", Pod: name, UID: "uid-" + name,
		Address: ip, Ports: map[string]int32{"http": 8080}, Owner: tOwner})
	return string(b)
}

func put(rev int64, name, ip string) rawEvent {
	return rawEvent{put: true, key: tPrefix + name, value: endpointValue(name, ip), rev: rev}
}

func del(rev int64, name string) rawEvent { return rawEvent{key: tPrefix + name, rev: rev} }

// startRecorder is a recorder from revision 10 over the seeded foreign key, whose first
// watch starts at t0 with the store at revision 10.
func startRecorder() *recorder {
	r := newRecorder(10, map[string]string{tPrefix + "foreign": "theirs"}, t0)
	r.watching(10, t0)
	return r
}

// hear plays a live watch's progress notifications (every 200 ms) from from to to.
func hear(r *recorder, from, to time.Duration) {
	for d := from; d <= to; d += 200 * time.Millisecond {
		r.heard(at(d))
	}
}

func expectViolation(t *testing.T, v []string, want string) {
	t.Helper()
	for _, s := range v {
		if strings.Contains(s, want) {
			t.Logf("flagged: %s", s)
			return
		}
	}
	t.Errorf("no violation containing %q; got %d: %q", want, len(v), v)
}

func final(kv ...string) map[string]string {
	m := map[string]string{tPrefix + "foreign": "theirs"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestRecorderPassesACleanHistory(t *testing.T) {
	w := testWorld(map[string]time.Duration{"web-1": 10 * time.Second}, "web-1", "web-2")
	r := startRecorder()
	r.deliver(at(2*time.Second), []rawEvent{put(11, "web-1", "10.0.0.1")})
	r.deliver(at(3*time.Second), []rawEvent{put(12, "web-2", "10.0.0.2"), {put: true, key: "/r/fence/x", value: "me", rev: 12}})
	hear(r, 3*time.Second, 11*time.Second)
	r.deliver(at(11*time.Second), []rawEvent{del(13, "web-1")})
	pods := map[string]corev1.Pod{"web-2": podOf("web-2", "10.0.0.2")}
	v := testChecks(w).judge(r, 13, final(tPrefix+"web-2", endpointValue("web-2", "10.0.0.2"), "/r/fence/x", "me"), pods, at(time.Minute))
	if len(v) != 0 {
		t.Fatalf("a clean history was flagged: %q", v)
	}
}

// A watch that broke and resumed past a compaction lost revisions 12..19: whatever happened
// there is unknown, so the record cannot vouch for anything.
func TestRecorderFlagsAGapAfterAWatchError(t *testing.T) {
	w := testWorld(nil, "web-1", "web-2")
	r := startRecorder()
	r.deliver(at(2*time.Second), []rawEvent{put(11, "web-1", "10.0.0.1")})
	r.broken(rpctypes.ErrCompacted, 20, at(3*time.Second))
	r.watching(21, at(4*time.Second))
	r.deliver(at(4*time.Second), []rawEvent{put(21, "web-2", "10.0.0.2")})
	pods := map[string]corev1.Pod{"web-1": podOf("web-1", "10.0.0.1"), "web-2": podOf("web-2", "10.0.0.2")}
	fin := final(tPrefix+"web-1", endpointValue("web-1", "10.0.0.1"), tPrefix+"web-2", endpointValue("web-2", "10.0.0.2"))
	expectViolation(t, testChecks(w).judge(r, 21, fin, pods, at(time.Minute)), "lost")
}

// A watch that silently skipped revisions (delivered 11, then 15) has a gap.
func TestRecorderFlagsSkippedRevisions(t *testing.T) {
	w := testWorld(nil, "web-1", "web-2")
	r := startRecorder()
	r.deliver(at(2*time.Second), []rawEvent{put(11, "web-1", "10.0.0.1")})
	r.broken(errors.New("watch channel closed"), 0, at(3*time.Second))
	r.watching(15, at(4*time.Second))
	r.deliver(at(4*time.Second), []rawEvent{put(15, "web-2", "10.0.0.2")})
	pods := map[string]corev1.Pod{"web-1": podOf("web-1", "10.0.0.1"), "web-2": podOf("web-2", "10.0.0.2")}
	fin := final(tPrefix+"web-1", endpointValue("web-1", "10.0.0.1"), tPrefix+"web-2", endpointValue("web-2", "10.0.0.2"))
	expectViolation(t, testChecks(w).judge(r, 15, fin, pods, at(time.Minute)), "never delivered")
}

// The record ends before the store's final revision: the last events were never seen.
func TestRecorderFlagsARecordThatDidNotCatchUp(t *testing.T) {
	w := testWorld(nil, "web-1")
	r := startRecorder()
	r.deliver(at(2*time.Second), []rawEvent{put(11, "web-1", "10.0.0.1")})
	pods := map[string]corev1.Pod{"web-1": podOf("web-1", "10.0.0.1")}
	fin := final(tPrefix+"web-1", endpointValue("web-1", "10.0.0.1"))
	expectViolation(t, testChecks(w).judge(r, 14, fin, pods, at(time.Minute)), "the store is at 14")
}

// A pod's endpoint deleted after it became ineligible, then written again and deleted again
// within the bound: a resurrected key that callers saw for 100 ms.
func TestRecorderFlagsAResurrectionInsideTheBound(t *testing.T) {
	w := testWorld(map[string]time.Duration{"web-1": 10 * time.Second}, "web-1")
	r := startRecorder()
	r.deliver(at(2*time.Second), []rawEvent{put(11, "web-1", "10.0.0.1")})
	hear(r, 2*time.Second, 10*time.Second)
	r.deliver(at(10*time.Second+100*time.Millisecond), []rawEvent{del(12, "web-1")})
	r.deliver(at(10*time.Second+200*time.Millisecond), []rawEvent{put(13, "web-1", "10.0.0.1")})
	r.deliver(at(10*time.Second+300*time.Millisecond), []rawEvent{del(14, "web-1")})
	expectViolation(t, testChecks(w).judge(r, 14, final(), map[string]corev1.Pod{}, at(time.Minute)), "resurrected")
}

// The watch broke while web-1 was eligible; a read at t0+3s showed the store at revision 12;
// web-1 became ineligible at t0+5s; the resumed watch replayed the delete (revision 12) at
// t0+6s. The delete happened by t0+3s, while the pod was eligible: stamping it at replay
// time would hide that.
func TestRecorderDoesNotStampReplaysAsLive(t *testing.T) {
	w := testWorld(map[string]time.Duration{"web-1": 5 * time.Second}, "web-1")
	r := startRecorder()
	r.deliver(at(2*time.Second), []rawEvent{put(11, "web-1", "10.0.0.1")})
	r.broken(errors.New("etcdserver: no leader"), 0, at(2500*time.Millisecond))
	r.watching(12, at(3*time.Second))
	r.deliver(at(6*time.Second), []rawEvent{del(12, "web-1")})
	expectViolation(t, testChecks(w).judge(r, 12, final(), map[string]corev1.Pod{}, at(time.Minute)), "eligible pod's endpoint")
}

// The store holds web-1 under its name, but with another address than the pod's: callers
// would send to the wrong place. Comparing names is not enough.
func TestRecorderComparesFullValues(t *testing.T) {
	w := testWorld(nil, "web-1")
	r := startRecorder()
	r.deliver(at(2*time.Second), []rawEvent{put(11, "web-1", "10.0.0.9")})
	pods := map[string]corev1.Pod{"web-1": podOf("web-1", "10.0.0.1")}
	fin := final(tPrefix+"web-1", endpointValue("web-1", "10.0.0.9"))
	expectViolation(t, testChecks(w).judge(r, 11, fin, pods, at(time.Minute)), "the API server's pod says")
}

// The store ends with a key outside the operator's keys that the record never saw written:
// the record is not the store's history.
func TestRecorderChecksItsViewAgainstTheStore(t *testing.T) {
	w := testWorld(nil, "web-1")
	r := startRecorder()
	r.deliver(at(2*time.Second), []rawEvent{put(11, "web-1", "10.0.0.1")})
	pods := map[string]corev1.Pod{"web-1": podOf("web-1", "10.0.0.1")}
	fin := final(tPrefix+"web-1", endpointValue("web-1", "10.0.0.1"), "/elsewhere/x", "written unseen")
	expectViolation(t, testChecks(w).judge(r, 11, fin, pods, at(time.Minute)), "the record says")
}

// The etcd client resumes a watch by itself after a reconnect and then delivers what
// happened while it was cut off, as if live. The recorder asks for progress every 200 ms, so
// a live watch is never silent for long: events that end a silence are replays. Here the
// watch last heard from the store at t0+2s, web-1 became ineligible at t0+4s, and the delete
// arrived at t0+6s: it may have happened while web-1 was eligible.
func TestRecorderTreatsEventsAfterASilenceAsReplays(t *testing.T) {
	w := testWorld(map[string]time.Duration{"web-1": 4 * time.Second}, "web-1")
	r := startRecorder()
	r.deliver(at(1500*time.Millisecond), []rawEvent{put(11, "web-1", "10.0.0.1")})
	r.heard(at(2 * time.Second))
	r.deliver(at(6*time.Second), []rawEvent{del(12, "web-1")})
	expectViolation(t, testChecks(w).judge(r, 12, final(), map[string]corev1.Pod{}, at(time.Minute)), "eligible pod's endpoint")
}

// A watch that keeps hearing from the store (progress every 200 ms) delivers live events.
func TestRecorderStampsEventsOfAnAttentiveWatchLive(t *testing.T) {
	w := testWorld(map[string]time.Duration{"web-1": 4 * time.Second}, "web-1")
	r := startRecorder()
	r.deliver(at(1500*time.Millisecond), []rawEvent{put(11, "web-1", "10.0.0.1")})
	hear(r, 2*time.Second, 4*time.Second)
	r.deliver(at(4100*time.Millisecond), []rawEvent{del(12, "web-1")})
	if v := testChecks(w).judge(r, 12, final(), map[string]corev1.Pod{}, at(time.Minute)); len(v) != 0 {
		t.Fatalf("a live delete 100 ms after the pod became ineligible was flagged: %q", v)
	}
}

// A store member dies and its watch goes silent; the watch on another member keeps
// delivering live: the event is live, not a replay.
func TestRecorderTakesTheLiveWatchOfAnotherMember(t *testing.T) {
	w := testWorld(map[string]time.Duration{"web-1": 4 * time.Second}, "web-1")
	r := startRecorder()
	r.deliverFrom(1, at(1500*time.Millisecond), []rawEvent{put(11, "web-1", "10.0.0.1")})
	r.deliver(at(1500*time.Millisecond), []rawEvent{put(11, "web-1", "10.0.0.1")})
	r.heard(at(2 * time.Second)) // member 0 is lost after this
	hear1 := func(from, to time.Duration) {
		for d := from; d <= to; d += 200 * time.Millisecond {
			r.heardFrom(1, at(d))
		}
	}
	hear1(2*time.Second, 4*time.Second)
	r.deliverFrom(1, at(4100*time.Millisecond), []rawEvent{del(12, "web-1")})
	r.deliver(at(7*time.Second), []rawEvent{del(12, "web-1")}) // member 0's watch resumed elsewhere: a replay
	if v := testChecks(w).judge(r, 12, final(), map[string]corev1.Pod{}, at(time.Minute)); len(v) != 0 {
		t.Fatalf("a delete delivered live by another member's watch was flagged: %q", v)
	}
}

// The store was stopped at revision 11 (the test paused the record there), web-1 became
// ineligible during the outage, and the store could commit again from t0+30s: the delete
// replayed after the outage happened after t0+30s, after web-1 became ineligible.
func TestRecorderPlacesReplaysAfterADeclaredOutage(t *testing.T) {
	w := testWorld(map[string]time.Duration{"web-1": 20 * time.Second}, "web-1")
	r := startRecorder()
	r.deliver(at(1500*time.Millisecond), []rawEvent{put(11, "web-1", "10.0.0.1")})
	r.heard(at(2 * time.Second)) // the store is stopped after this
	r.quietSince(11, at(30*time.Second))
	r.deliver(at(31*time.Second), []rawEvent{del(12, "web-1")})
	if v := testChecks(w).judge(r, 12, final(), map[string]corev1.Pod{}, at(time.Minute)); len(v) != 0 {
		t.Fatalf("a delete replayed after a declared outage was flagged: %q", v)
	}
	// Without the declaration the delete may have come at any time since t0+2s.
	r2 := startRecorder()
	r2.deliver(at(1500*time.Millisecond), []rawEvent{put(11, "web-1", "10.0.0.1")})
	r2.heard(at(2 * time.Second))
	r2.deliver(at(31*time.Second), []rawEvent{del(12, "web-1")})
	expectViolation(t, testChecks(w).judge(r2, 12, final(), map[string]corev1.Pod{}, at(time.Minute)), "eligible pod's endpoint")
}

// A put for a pod more than a moment (1 s) after it became ineligible is a violation, even
// inside the bound and even when it only rewrites a key that is still there: a caller
// reading it then gets a fresh record of a pod that is going away. A put 100 ms after is a
// write in flight from a view a moment old, and tolerated.
func TestRecorderFlagsAPutAfterIneligibility(t *testing.T) {
	w := testWorld(map[string]time.Duration{"web-1": 10 * time.Second}, "web-1")
	r := startRecorder()
	r.deliver(at(2*time.Second), []rawEvent{put(11, "web-1", "10.0.0.1")})
	hear(r, 2*time.Second, 12*time.Second)
	r.deliver(at(10*time.Second+100*time.Millisecond), []rawEvent{put(12, "web-1", "10.0.0.1")})
	r.deliver(at(12*time.Second), []rawEvent{put(13, "web-1", "10.0.0.1")})
	r.deliver(at(12*time.Second+100*time.Millisecond), []rawEvent{del(14, "web-1")})
	v := testChecks(w).judge(r, 14, final(), map[string]corev1.Pod{}, at(time.Minute))
	expectViolation(t, v, "written 2s after its pod became ineligible")
	if len(v) != 1 {
		t.Errorf("want only the put 2 s after flagged, got %q", v)
	}
}
