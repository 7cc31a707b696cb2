package eureka

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// Defaults of the delta window: Eureka's server keeps recent changes 3 minutes
// (eureka.server.retention-time-in-m-s-in-delta-queue).
const (
	DefaultDeltaRetention = 3 * time.Minute
	DefaultDeltaMax       = 10000
)

// RegistryOptions configures a Registry.
type RegistryOptions struct {
	// DeltaRetention is how long a change stays in the delta (default 3m).
	DeltaRetention time.Duration
	// DeltaMax bounds the delta window's entries (default 10000); the oldest go first. A
	// client that missed a change that was dropped sees its hash code differ and fetches
	// the full registry, as Eureka's clients do.
	DeltaMax int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (o RegistryOptions) withDefaults() RegistryOptions {
	if o.DeltaRetention <= 0 {
		o.DeltaRetention = DefaultDeltaRetention
	}
	if o.DeltaMax <= 0 {
		o.DeltaMax = DefaultDeltaMax
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// deltaEntry is one change of the window.
type deltaEntry struct {
	at   time.Time
	key  string    // store key: one instance
	inst *Instance // its value after the change, Action set
}

// Registry keeps the Eureka view of the store: the current instances and the window of
// recent changes. Apply and Prune are called by one goroutine (the follower); View is safe
// for any number of readers.
type Registry struct {
	opts RegistryOptions

	mu      sync.Mutex
	byKey   map[string]*Instance
	version int64
	window  []deltaEntry // oldest first

	view atomic.Pointer[View]
}

// NewRegistry is an empty registry (version 0).
func NewRegistry(opts RegistryOptions) *Registry {
	r := &Registry{opts: opts.withDefaults(), byKey: map[string]*Instance{}}
	r.view.Store(buildView(0, nil, nil))
	return r
}

// View is the current view.
func (r *Registry) View() *View { return r.view.Load() }

// Apply records a change of the store's list and publishes a new view when it changed
// anything a client sees. It reports whether it did.
func (r *Registry) Apply(ch discovery.Change) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Now()
	ms := now.UnixMilli()
	changed := false
	record := func(key string, inst *Instance, action ActionType) {
		c := *inst
		c.Action, c.UpdatedMillis = action, ms
		r.window = append(r.window, deltaEntry{at: now, key: key, inst: &c})
		changed = true
	}
	for i := range ch.Removed {
		key := ch.Removed[i].Key
		if old, ok := r.byKey[key]; ok {
			delete(r.byKey, key)
			record(key, old, Deleted)
		}
	}
	for _, list := range [][]discovery.Instance{ch.Added, ch.Updated} {
		for i := range list {
			in := &list[i]
			inst := FromInstance(in, ms)
			old, ok := r.byKey[in.Key]
			switch {
			case !ok:
				r.byKey[in.Key] = inst
				record(in.Key, inst, Added)
			case !equalValue(old, inst):
				r.byKey[in.Key] = inst
				record(in.Key, inst, Modified)
			}
		}
	}
	r.trim(now)
	if changed {
		r.version++
		r.publish()
	}
	return changed
}

// Prune drops the changes older than the retention and publishes a view without them when
// it dropped any.
func (r *Registry) Prune() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := len(r.window)
	r.trim(r.opts.Now())
	if len(r.window) == before {
		return false
	}
	r.publish()
	return true
}

// trim applies the window's bounds: age and size.
func (r *Registry) trim(now time.Time) {
	cut := 0
	for cut < len(r.window) && now.Sub(r.window[cut].at) > r.opts.DeltaRetention {
		cut++
	}
	cut = max(cut, len(r.window)-r.opts.DeltaMax)
	if cut > 0 {
		r.window = slices.Clone(r.window[cut:]) // release the dropped entries' array
	}
}

func (r *Registry) publish() {
	current := make([]*Instance, 0, len(r.byKey))
	for _, inst := range r.byKey {
		current = append(current, inst)
	}
	r.view.Store(buildView(r.version, current, deltaOf(r.window)))
}

// deltaOf is the delta of a window: the last change of each instance, in window order.
func deltaOf(window []deltaEntry) []*Instance {
	last := make(map[string]int, len(window))
	for i, e := range window {
		last[e.key] = i
	}
	out := make([]*Instance, 0, len(last))
	for i, e := range window {
		if last[e.key] == i {
			out = append(out, e.inst)
		}
	}
	return out
}

// View is one immutable version of the registry, with the cache of its encoded responses.
type View struct {
	// Version increases with every change a client can see (versions__delta).
	Version int64
	// Apps are the applications sorted by name, their instances by ID.
	Apps []*Application
	// Delta are the applications of the recent changes (instances with Action set; in each
	// application the DELETED ones last, for the Java client).
	Delta []*Application
	// HashCode is the reconcile hash code of Apps (apps__hashcode, in full and delta).
	HashCode string
	// Instances counts the instances of Apps.
	Instances int

	byName map[string]*Application
	byID   map[string]*Instance
	byVIP  map[string][]*Instance // lower-case VIP; secure VIPs are the same names here

	cache responseCache
}

// buildView groups current and delta instances into applications.
func buildView(version int64, current, delta []*Instance) *View {
	v := &View{Version: version, Instances: len(current), byName: map[string]*Application{},
		byID: map[string]*Instance{}, byVIP: map[string][]*Instance{}}
	v.Apps = group(current)
	v.Delta = group(delta)
	for _, app := range v.Delta {
		// DELETED after the others: when a client's registry no longer has the application,
		// its first ADDED or MODIFIED instance makes the Java client (updateDelta) add the
		// delta's application whole, and only the DELETED instances it meets after that are
		// taken out again.
		slices.SortStableFunc(app.Instances, func(a, b *Instance) int {
			return cmpBool(a.Action == Deleted, b.Action == Deleted)
		})
	}
	for _, app := range v.Apps {
		v.byName[app.Name] = app
		for _, inst := range app.Instances {
			if _, dup := v.byID[inst.ID]; !dup {
				v.byID[inst.ID] = inst
			}
			vip := strings.ToLower(inst.VIPAddress)
			v.byVIP[vip] = append(v.byVIP[vip], inst)
		}
	}
	v.HashCode = HashCode(statusCounts(v.Apps))
	return v
}

// group sorts instances into applications by name, instances by ID.
func group(list []*Instance) []*Application {
	byApp := map[string]*Application{}
	var apps []*Application
	for _, inst := range list {
		app, ok := byApp[inst.App]
		if !ok {
			app = &Application{Name: inst.App}
			byApp[inst.App] = app
			apps = append(apps, app)
		}
		app.Instances = append(app.Instances, inst)
	}
	slices.SortFunc(apps, func(a, b *Application) int { return strings.Compare(a.Name, b.Name) })
	for _, app := range apps {
		slices.SortStableFunc(app.Instances, func(a, b *Instance) int { return strings.Compare(a.ID, b.ID) })
	}
	return apps
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// App is the application named name (case-insensitive, as Eureka's names are upper-case).
func (v *View) App(name string) (*Application, bool) {
	app, ok := v.byName[strings.ToUpper(name)]
	return app, ok
}

// Instance is the instance with id in any application.
func (v *View) Instance(id string) (*Instance, bool) {
	inst, ok := v.byID[id]
	return inst, ok
}

// AppInstance is the instance with id in the application named app.
func (v *View) AppInstance(app, id string) (*Instance, bool) {
	a, ok := v.App(app)
	if !ok {
		return nil, false
	}
	i, found := slices.BinarySearchFunc(a.Instances, id, func(inst *Instance, id string) int { return strings.Compare(inst.ID, id) })
	if !found {
		return nil, false
	}
	return a.Instances[i], true
}

// VIP is the applications with instances whose VIP address is vip (case-insensitive).
func (v *View) VIP(vip string) ([]*Application, bool) {
	list, ok := v.byVIP[strings.ToLower(vip)]
	if !ok {
		return nil, false
	}
	return group(list), true
}
