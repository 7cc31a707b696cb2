// Package echo recognises the operator's own writes when they come back to it as events, so
// that they do not enqueue another reconcile of the registry that made them (issue 16: a pod
// transition cost ~2.3 reconciles, most of them echoes).
//
//   - A ServiceRegistry status write comes back as an update of the registry whose only
//     change is the status written: Statuses remembers the status last written to each
//     registry, and IsEcho recognises such an update. The comparison is of the status as the
//     API server stores it (metav1.Time has a precision of one second there; the operator
//     computes times to the nanosecond).
//   - A store write comes back through the store's watch, often before the write's own
//     acknowledgement has reached the reconciler's memory of the store: Writes tracks the
//     store keys being written (Begin, then the returned end), so that a watch event of a
//     key in flight is rechecked once the write's outcome is known, instead of being taken
//     for somebody else's change at once.
//
// Nothing here decides what a reconcile does; it only decides whether an event needs one.
package echo

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// stored compares values as the API server stores them: times to the second (metav1.Time is
// serialized as RFC 3339 without fractions), nil and empty slices and maps alike.
var stored = conversion.EqualitiesOrDie(
	func(a, b metav1.Time) bool {
		return a.Truncate(time.Second).Equal(b.Truncate(time.Second))
	},
)

// SameStatus reports whether a and b are one status once stored.
func SameStatus(a, b v1beta1.ServiceRegistryStatus) bool {
	return stored.DeepEqual(a, b)
}

// StatusOnly reports whether old and new differ in nothing but their status and the metadata
// every write changes (resourceVersion, managedFields): a status write, by anyone.
func StatusOnly(old, new *v1beta1.ServiceRegistry) bool {
	if old == nil || new == nil {
		return false
	}
	om, nm := old.ObjectMeta, new.ObjectMeta // shallow copies: only the two fields are cleared
	om.ResourceVersion, nm.ResourceVersion = "", ""
	om.ManagedFields, nm.ManagedFields = nil, nil
	return stored.DeepEqual(om, nm) && stored.DeepEqual(old.Spec, new.Spec)
}

// versionPair names an update: the object's UID and its versions before and after.
type versionPair struct {
	uid      types.UID
	old, new string
}

// versionMemo remembers StatusOnly's answers for the last few updates (a ring: the handlers
// of one update ask within microseconds of each other).
type versionMemo struct {
	mu   sync.Mutex
	keys [16]versionPair
	vals [16]bool
	next int
}

func (m *versionMemo) get(k versionPair) (v, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.keys {
		if m.keys[i] == k {
			return m.vals[i], true
		}
	}
	return false, false
}

func (m *versionMemo) put(k versionPair, v bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[m.next], m.vals[m.next] = k, v
	m.next = (m.next + 1) % len(m.keys)
}

// Statuses remembers the status the operator last wrote to each ServiceRegistry. The zero
// value is not usable: use NewStatuses.
type Statuses struct {
	mu      sync.Mutex
	written map[types.NamespacedName]writtenStatus
	// versions remembers StatusOnly's answer per update (Statuses.StatusOnly).
	versions versionMemo
}

type writtenStatus struct {
	uid    types.UID
	status v1beta1.ServiceRegistryStatus
}

// NewStatuses returns an empty memory of written statuses.
func NewStatuses() *Statuses {
	return &Statuses{written: map[types.NamespacedName]writtenStatus{}}
}

// Writing records that st is being written to the registry name with this UID. Call it before
// the write: its echo may arrive before the write returns. st is not retained by the caller
// afterwards (it is kept as is, not copied).
func (s *Statuses) Writing(name types.NamespacedName, uid types.UID, st v1beta1.ServiceRegistryStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written[name] = writtenStatus{uid: uid, status: st}
}

// Forget drops what is remembered of a registry that is gone.
func (s *Statuses) Forget(name types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.written, name)
}

// IsEcho reports whether the update from old to new is the operator's own status write coming
// back: nothing but the status changed, and the status is the one last written to this
// object. Any other change (spec, labels, annotations, finalizers, deletion, a status
// written by somebody else) is not an echo.
func (s *Statuses) IsEcho(old, new *v1beta1.ServiceRegistry) bool {
	if !s.StatusOnly(old, new) {
		return false
	}
	s.mu.Lock()
	w, ok := s.written[types.NamespacedName{Namespace: new.Namespace, Name: new.Name}]
	s.mu.Unlock()
	return ok && w.uid == new.UID && SameStatus(w.status, new.Status)
}

// StatusOnly is StatusOnly, its answer remembered for the update's pair of versions: every
// informer handler of ServiceRegistry updates asks it of the same update (three in the
// operator: the reconciler's echo filter, its peer-registry watch and the gate releaser).
// Two objects of one UID and resourceVersion are one version of one object as the API
// server serves them; objects without a resourceVersion (built by hand) are compared anew.
func (s *Statuses) StatusOnly(old, new *v1beta1.ServiceRegistry) bool {
	if old == nil || new == nil {
		return false
	}
	key := versionPair{uid: new.UID, old: old.ResourceVersion, new: new.ResourceVersion}
	if old.UID != new.UID || key.old == "" || key.new == "" {
		return StatusOnly(old, new)
	}
	if v, ok := s.versions.get(key); ok {
		return v
	}
	v := StatusOnly(old, new)
	s.versions.put(key, v)
	return v
}

// Key is one store key: a pod's record of a service in a namespace, in one store ("" for a
// single store).
type Key struct {
	Store, Service, Namespace, Pod string
}

// Writes tracks the store keys being written. The zero value is not usable: use NewWrites; a
// nil *Writes tracks nothing (no key is ever in flight).
type Writes struct {
	mu       sync.Mutex
	inFlight map[Key]int
	// after are the functions to call once every write of a key has ended (AfterEnd).
	after map[Key][]func()
}

// NewWrites returns a tracker with nothing in flight.
func NewWrites() *Writes {
	return &Writes{inFlight: map[Key]int{}, after: map[Key][]func(){}}
}

// Begin marks keys as being written until the returned end is called (once: when the write's
// outcome is known and recorded). Keys may be in several writes at once.
func (w *Writes) Begin(keys []Key) (end func()) {
	if w == nil {
		return func() {}
	}
	w.mu.Lock()
	for _, k := range keys {
		w.inFlight[k]++
	}
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			var due []func()
			w.mu.Lock()
			for _, k := range keys {
				if w.inFlight[k] > 1 {
					w.inFlight[k]--
					continue
				}
				delete(w.inFlight, k)
				due = append(due, w.after[k]...)
				delete(w.after, k)
			}
			w.mu.Unlock()
			for _, f := range due {
				f()
			}
		})
	}
}

// AfterEnd arranges for f to be called once no write of k is in flight any more, and reports
// whether it did: false when none is in flight now (f is not called; the caller goes on at
// once). f runs on the goroutine that ends the last write, after its outcome is recorded: it
// must not block. Between a true answer and f's call, Begin of k may start further writes;
// f does not wait for those.
func (w *Writes) AfterEnd(k Key, f func()) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inFlight[k] == 0 {
		return false
	}
	w.after[k] = append(w.after[k], f)
	return true
}
