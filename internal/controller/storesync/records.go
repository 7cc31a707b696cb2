package storesync

import (
	"maps"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/store"
)

// knownRecords is the reconciler's view of what each ServiceRegistry has in the store: the
// records of its scope as last listed, updated by every acknowledged write. An entry exists
// only after a successful List, so the first write for a registry after a start is always
// planned against the store's real content. Any failed or conflicting write marks the entry
// for a fresh List (forgetStore).
type knownRecords struct {
	mu sync.Mutex
	// entries are keyed by registry, then by store name ("" for a single store).
	entries map[types.NamespacedName]map[string]knownEntry
}

type knownEntry struct {
	uid     types.UID
	scope   store.Scope
	records map[string]store.Record // every record of the scope, keyed by pod
	// pending are the newest changes the store reported (its Watcher) that the records did
	// not explain when they arrived, keyed by pod: a change of anything else, or a write of
	// this operator still on its way back.
	pending map[string]store.Change
	// verify asks the next reconcile to re-read the scope and diff it with records (the
	// periodic full re-read, or a watch that missed changes).
	verify bool
	// relist is set when the records are no longer to be planned against (a conflicting
	// or failed write: forgetStore): get reports nothing until the scope is listed again
	// (set), but the records still tell a reported change from the ones they hold, so a
	// change arriving during the re-read still enqueues the registry (note).
	relist bool
}

// maxPending bounds the changes remembered per registry and store; past it the scope is
// re-read instead.
const maxPending = 4096

// explains reports whether records already reflect change c: a put the records hold at its
// revision or later, or a delete of a pod they do not hold.
func explains(records map[string]store.Record, c store.Change) bool {
	rec, has := records[c.Pod]
	if c.Deleted {
		return !has || rec.Revision > c.Revision
	}
	return has && rec.Revision >= c.Revision
}

func newKnownRecords() *knownRecords {
	return &knownRecords{entries: map[types.NamespacedName]map[string]knownEntry{}}
}

// get returns a copy of the records known for the registry in scope in one store, or false.
// stale is true when the store reported a change they do not explain, or a re-read is due:
// the caller must list the scope again (and set what it listed).
func (k *knownRecords) get(name types.NamespacedName, storeName string, uid types.UID, scope store.Scope) (records map[string]store.Record, stale, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.entries[name][storeName]
	if !ok || e.uid != uid || e.scope != scope || e.relist {
		return nil, false, false
	}
	e.pending = dropExplained(e.records, e.pending)
	k.entries[name][storeName] = e
	out := make(map[string]store.Record, len(e.records))
	for pod, r := range e.records {
		out[pod] = r
	}
	return out, e.verify || len(e.pending) > 0, true
}

// note records a change the store reported for the registry's scope in one store. It
// reports whether the change needs a reconcile: the registry's records there are known and
// do not explain it (a change by anyone else, or this operator's write not yet
// acknowledged, which the next reconcile then finds explained).
func (k *knownRecords) note(name types.NamespacedName, storeName string, c store.Change) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.entries[name][storeName]
	if !ok || e.scope.Service != c.Service || e.scope.Namespace != c.Namespace || explains(e.records, c) {
		return false
	}
	if e.pending == nil {
		e.pending = map[string]store.Change{}
	}
	if old, seen := e.pending[c.Pod]; !seen || old.Revision < c.Revision {
		e.pending[c.Pod] = c
	}
	if len(e.pending) > maxPending {
		e.pending, e.verify = nil, true
	}
	k.entries[name][storeName] = e
	return true
}

// unexplained reports whether the registry's records in one store still leave a reported
// change unexplained, or a re-read is due (what get would call stale), dropping the changes
// they explain by now. True when nothing is known of them any more: the next reconcile lists.
func (k *knownRecords) unexplained(name types.NamespacedName, storeName string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.entries[name][storeName]
	if !ok {
		return true
	}
	e.pending = dropExplained(e.records, e.pending)
	k.entries[name][storeName] = e
	return e.verify || len(e.pending) > 0
}

// dropExplained removes the changes records explain from pending; nil once none is left (an
// emptied map keeps its buckets, and every registry with a write sees one change at least).
func dropExplained(records map[string]store.Record, pending map[string]store.Change) map[string]store.Change {
	for pod, c := range pending {
		if explains(records, c) {
			delete(pending, pod)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	return pending
}

// verifyAll asks for a re-read of every known scope in storeName ("" for every store), and
// returns the registries concerned.
func (k *knownRecords) verifyAll(storeName string, every bool) []types.NamespacedName {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []types.NamespacedName
	for name, stores := range k.entries {
		for sn, e := range stores {
			if every || sn == storeName {
				e.verify = true
				stores[sn] = e
				out = append(out, name)
			}
		}
	}
	return out
}

func (k *knownRecords) set(name types.NamespacedName, storeName string, uid types.UID, scope store.Scope, records map[string]store.Record) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.entries[name] == nil {
		k.entries[name] = map[string]knownEntry{}
	}
	// Reported changes stay until records explain them: one that arrived while the scope
	// was being listed may be newer than what was listed.
	var pending map[string]store.Change
	if old, ok := k.entries[name][storeName]; ok && old.scope == scope && old.uid == uid {
		pending = old.pending
	}
	shareEqualPorts(records)
	k.entries[name][storeName] = knownEntry{uid: uid, scope: scope, records: records, pending: pending}
}

// shareEqualPorts makes records with equal ports share one map. A registry's pods resolve the
// same ports, but its records come from several reconciles and listings, each with maps of
// its own: kept for as long as the records are, they were ~8 % of the live heap at 5,000 pods.
// Up to maxSharedPorts distinct port sets are shared (a registry's pods rarely differ at all;
// the bound keeps the work linear). Nothing modifies a record's ports once built.
func shareEqualPorts(records map[string]store.Record) {
	var shared [maxSharedPorts]map[string]int32
	n := 0
	for pod, rec := range records {
		if len(rec.Ports) == 0 {
			continue
		}
		i := slices.IndexFunc(shared[:n], func(m map[string]int32) bool { return maps.Equal(m, rec.Ports) })
		switch {
		case i < 0 && n < len(shared):
			shared[n] = rec.Ports
			n++
		case i >= 0 && !samePortsMap(rec.Ports, shared[i]):
			rec.Ports = shared[i]
			records[pod] = rec
		}
	}
}

// maxSharedPorts bounds the distinct port sets shareEqualPorts shares per registry.
const maxSharedPorts = 4

// samePortsMap reports whether a and b are one map (not merely equal ones).
func samePortsMap(a, b map[string]int32) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// forget drops what is known of the registry in every store.
func (k *knownRecords) forget(name types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.entries, name)
}

// forgetStore makes the next reconcile list the registry's scope in one store again before
// it plans (get reports nothing), keeping the records only to judge the changes the store
// reports meanwhile (note) and the changes already reported, which stay pending until a
// listing explains them (set).
func (k *knownRecords) forgetStore(name types.NamespacedName, storeName string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.entries[name][storeName]; ok {
		e.relist = true
		k.entries[name][storeName] = e
	}
}

// applied returns records after changes were acknowledged with the written records.
func applied(records map[string]store.Record, changes store.Changes, written []store.Record) map[string]store.Record {
	for _, d := range changes.Delete {
		delete(records, d.Pod)
	}
	for _, w := range written {
		records[w.Pod] = w
	}
	return records
}

// byPod indexes records by pod name.
func byPod(records []store.Record) map[string]store.Record {
	out := make(map[string]store.Record, len(records))
	for _, r := range records {
		out[r.Pod] = r
	}
	return out
}

// services are the service names of the scopes known for the registry, in any store.
func (k *knownRecords) services(name types.NamespacedName) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.entries[name]))
	for _, e := range k.entries[name] {
		out = append(out, e.scope.Service)
	}
	return out
}

// forgetNamespaces drops what is known of the registries of the namespaces in: a shard
// given up may come back later, and its first write then plans against a fresh listing.
func (k *knownRecords) forgetNamespaces(in func(namespace string) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for name := range k.entries {
		if in(name.Namespace) {
			delete(k.entries, name)
		}
	}
}

// markRecorded sets out[pod] for every pod whose record, with the pod's UID as podUIDs gives
// it, is in a store entry of the registry with this UID that is current (not waiting for a
// relist).
func (k *knownRecords) markRecorded(name types.NamespacedName, uid types.UID, podUIDs map[string]string, out map[string]bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range k.entries[name] {
		if e.uid != uid || e.relist {
			continue
		}
		for pod, rec := range e.records {
			if rec.UID == podUIDs[pod] {
				out[pod] = true
			}
		}
	}
}
