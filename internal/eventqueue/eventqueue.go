// Package eventqueue records registrar's Events through a bounded queue and one writer,
// without client-go's series cache.
//
// client-go's events.k8s.io broadcaster keeps a copy of every Event it recorded for six
// minutes, to turn a repeat into a series. Its key for a repeat includes the object's
// resourceVersion, which every status write of a ServiceRegistry (and every pod transition)
// changes, so registrar's Events never made a series: the copies only cost memory. In
// `make bench-sweep` they were ~5.6 MB of a 5,000-pod operator's 39 MB live heap (the
// per-endpoint Events at their default 10/s) and ~9.5 MB of a 20,000-pod operator's 103 MB
// (the registries' condition Events) — twice that in RSS, as Go's collector lets the heap
// grow to twice what is live. The broadcaster also starts a goroutine per Event.
//
// Here an Event is built when it is recorded, queued (bounded, as client-go's is at 1,000;
// a full queue drops it) and written once by a single worker with a timeout (a failed write
// is dropped too, not retried). Every drop is reported to OnDrop.
package eventqueue

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Drop reasons passed to Config.OnDrop.
const (
	DropQueueFull   = "QueueFull"
	DropWriteFailed = "WriteFailed"
	DropInvalid     = "Invalid"
)

// maxNote is the API server's limit on an Event's note (bytes).
const maxNote = 1024

// CreateFunc writes one Event.
type CreateFunc func(ctx context.Context, ev *eventsv1.Event) error

// ClientCreate writes Events with a controller-runtime client (its scheme must know
// events.k8s.io/v1).
func ClientCreate(c client.Client) CreateFunc {
	return func(ctx context.Context, ev *eventsv1.Event) error {
		if err := c.Create(ctx, ev); err != nil {
			return fmt.Errorf("create Event %s/%s: %w", ev.Namespace, ev.Name, err)
		}
		return nil
	}
}

// Config configures a Recorder.
type Config struct {
	// Scheme resolves the kind of the objects Events are about.
	Scheme *runtime.Scheme
	// Controller is the Events' reportingController; the reportingInstance is Controller-hostname.
	Controller string
	// Create writes an Event.
	Create CreateFunc
	// Size bounds the queue (default 1000).
	Size int
	// Timeout bounds each write (default 10 s).
	Timeout time.Duration
	// OnDrop is told of every Event not written, with the Event's reason and a Drop* reason.
	OnDrop func(eventReason, why string)
	Clock  clock.PassiveClock
	Log    logr.Logger
}

// Recorder is an events.EventRecorder (and AnnotatedEventRecorder: controller-runtime's
// recorder.EventRecorder) writing through a bounded queue; run it with Start (a
// manager.Runnable that does not need leader election).
type Recorder struct {
	cfg      Config
	instance string
	queue    chan *eventsv1.Event
}

// New returns a Recorder; Start writes what it queues.
func New(cfg Config) *Recorder {
	if cfg.Size <= 0 {
		cfg.Size = 1000
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OnDrop == nil {
		cfg.OnDrop = func(string, string) {}
	}
	host, _ := os.Hostname()
	instance := cfg.Controller + "-" + host
	if len(instance) > 128 {
		instance = instance[:128]
	}
	return &Recorder{cfg: cfg, instance: instance, queue: make(chan *eventsv1.Event, cfg.Size)}
}

// Eventf queues an Event about regarding (and related, which may be nil). It never blocks:
// an Event that does not fit the queue is dropped.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.AnnotatedEventf(regarding, related, nil, eventtype, reason, action, note, args...)
}

// AnnotatedEventf is Eventf for an Event with annotations.
func (r *Recorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	ev, err := r.build(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err != nil {
		r.cfg.Log.V(1).Info("Event not recorded", "reason", reason, "error", err)
		r.cfg.OnDrop(reason, DropInvalid)
		return
	}
	ev.Annotations = annotations
	select {
	case r.queue <- ev:
	default:
		r.cfg.OnDrop(reason, DropQueueFull)
	}
}

func (r *Recorder) build(regarding, related runtime.Object, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		return nil, fmt.Errorf("event type %q is neither Normal nor Warning", eventtype)
	}
	ref, err := reference.GetReference(r.cfg.Scheme, regarding)
	if err != nil {
		return nil, fmt.Errorf("reference to the object of the Event: %w", err)
	}
	var rel *corev1.ObjectReference
	if related != nil {
		if rel, err = reference.GetReference(r.cfg.Scheme, related); err != nil {
			rel = nil // as client-go: an Event without its related object rather than none
		}
	}
	if len(note) > maxNote {
		note = note[:maxNote]
	}
	now := r.cfg.Clock.Now()
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// client-go's name: the object's name and the time in hex nanoseconds.
			Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: ns,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.cfg.Controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             rel,
		Note:                note,
		Type:                eventtype,
	}, nil
}

// Start writes queued Events one at a time until ctx ends; those still queued then are
// dropped.
func (r *Recorder) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-r.queue:
			r.write(ctx, ev)
		}
	}
}

func (r *Recorder) write(ctx context.Context, ev *eventsv1.Event) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	if err := r.cfg.Create(ctx, ev); err != nil {
		r.cfg.Log.V(1).Info("Event not written", "reason", ev.Reason, "regarding", ev.Regarding.Name,
			"namespace", ev.Namespace, "error", err)
		r.cfg.OnDrop(ev.Reason, DropWriteFailed)
	}
}

// NeedLeaderElection is false: every replica reports its own work.
func (r *Recorder) NeedLeaderElection() bool { return false }
