package eventqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
)

type drops struct {
	mu  sync.Mutex
	got []string
}

func (d *drops) add(reason, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, reason+"/"+why)
}

func (d *drops) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "7"}}
}

func TestEventAsClientGoBuildsIt(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 5, time.UTC)
	rec := New(Config{Scheme: clientgoscheme.Scheme, Controller: "registrar", Clock: clocktesting.NewFakePassiveClock(now),
		Create: func(context.Context, *eventsv1.Event) error { return nil }})
	rel := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"}}
	rec.Eventf(pod("web-1"), rel, corev1.EventTypeNormal, "Registered", "Register", "registered %s in %s", "10.0.0.1:80", "svc")
	ev := <-rec.queue
	if ev.Name != fmt.Sprintf("web-1.%x", now.UnixNano()) || ev.Namespace != "ns" {
		t.Errorf("name %s/%s, want ns/web-1.<hex nanoseconds> as client-go names it", ev.Namespace, ev.Name)
	}
	if ev.Regarding.Kind != "Pod" || ev.Regarding.Name != "web-1" || ev.Regarding.UID != "uid-web-1" || ev.Regarding.ResourceVersion != "7" {
		t.Errorf("regarding %+v", ev.Regarding)
	}
	if ev.Related == nil || ev.Related.Kind != "Service" || ev.Related.Name != "svc" {
		t.Errorf("related %+v", ev.Related)
	}
	if ev.Note != "registered 10.0.0.1:80 in svc" || ev.Reason != "Registered" || ev.Action != "Register" || ev.Type != "Normal" {
		t.Errorf("event %+v", ev)
	}
	if ev.ReportingController != "registrar" || !strings.HasPrefix(ev.ReportingInstance, "registrar-") || !ev.EventTime.Time.Equal(now) {
		t.Errorf("reporting %s %s at %v", ev.ReportingController, ev.ReportingInstance, ev.EventTime)
	}
}

func TestAnnotatedEvent(t *testing.T) {
	rec := New(Config{Scheme: clientgoscheme.Scheme, Controller: "registrar",
		Create: func(context.Context, *eventsv1.Event) error { return nil }})
	rec.AnnotatedEventf(pod("a"), nil, map[string]string{"k": "v"}, corev1.EventTypeWarning, "WarmupFailed", "WarmUp", "%d of %d", 1, 2)
	ev := <-rec.queue
	if ev.Annotations["k"] != "v" || ev.Note != "1 of 2" || ev.Type != corev1.EventTypeWarning {
		t.Errorf("event %+v", ev)
	}
	if cap(New(Config{}).queue) != 1000 {
		t.Error("the default queue is not client-go's 1,000")
	}
}

func TestBadInputIsDroppedNotQueued(t *testing.T) {
	d := &drops{}
	rec := New(Config{Scheme: runtime.NewScheme(), Controller: "registrar", OnDrop: d.add,
		Create: func(context.Context, *eventsv1.Event) error { return nil }})
	rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Registered", "Register", "x") // kind unknown to the scheme
	rec = New(Config{Scheme: clientgoscheme.Scheme, Controller: "registrar", OnDrop: d.add,
		Create: func(context.Context, *eventsv1.Event) error { return nil }})
	rec.Eventf(pod("a"), nil, "Loud", "Registered", "Register", "x")
	rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Registered", "Register", "%s", strings.Repeat("n", 5000))
	if got := d.list(); len(got) != 2 || got[0] != "Registered/Invalid" || got[1] != "Registered/Invalid" {
		t.Errorf("drops %v, want two Invalid", got)
	}
	if len(rec.queue) != 1 {
		t.Fatalf("%d queued, want the one with a long note", len(rec.queue))
	}
	if n := len((<-rec.queue).Note); n != maxNote {
		t.Errorf("note of %d bytes, want it cut to %d", n, maxNote)
	}
}

func TestQueueIsBoundedAndWrittenInOrder(t *testing.T) {
	d := &drops{}
	release := make(chan struct{})
	var mu sync.Mutex
	var written []string
	rec := New(Config{Scheme: clientgoscheme.Scheme, Controller: "registrar", Size: 3, OnDrop: d.add,
		Create: func(ctx context.Context, ev *eventsv1.Event) error {
			<-release
			mu.Lock()
			defer mu.Unlock()
			written = append(written, ev.Regarding.Name)
			return nil
		}})
	for _, name := range []string{"a", "b", "c", "d", "e"} { // nothing written yet: the queue holds 3
		rec.Eventf(pod(name), nil, corev1.EventTypeNormal, "Deregistered", "Deregister", "x")
	}
	if got := d.list(); len(got) != 2 || got[0] != "Deregistered/QueueFull" {
		t.Fatalf("drops %v, want the two beyond the queue's 3", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rec.Start(ctx) }()
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(written)
		mu.Unlock()
		if n == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(written, ",") != "a,b,c" {
		t.Errorf("written %v, want a,b,c", written)
	}
}

func TestFailedWriteIsDroppedWithinTheTimeout(t *testing.T) {
	d := &drops{}
	calls := make(chan struct{}, 2)
	rec := New(Config{Scheme: clientgoscheme.Scheme, Controller: "registrar", Timeout: 50 * time.Millisecond, OnDrop: d.add,
		Create: func(ctx context.Context, ev *eventsv1.Event) error {
			calls <- struct{}{}
			if ev.Regarding.Name == "hung" {
				<-ctx.Done() // an API server that does not answer
				return ctx.Err()
			}
			return errors.New("forbidden")
		}})
	rec.Eventf(pod("hung"), nil, corev1.EventTypeNormal, "Registered", "Register", "x")
	rec.Eventf(pod("refused"), nil, corev1.EventTypeNormal, "Deregistered", "Deregister", "x")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = rec.Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(d.list()) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := d.list(); len(got) != 2 || got[0] != "Registered/WriteFailed" || got[1] != "Deregistered/WriteFailed" {
		t.Errorf("drops %v, want both WriteFailed, the hung one after its timeout", got)
	}
	if len(calls) != 2 {
		t.Errorf("%d writes, want one each (no retry)", len(calls))
	}
}
