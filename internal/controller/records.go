package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/registrar-dev/registrar/internal/store"
)

// knownRecords is the reconciler's view of what each ServiceRegistry has in the store: the
// records of its scope as last listed, updated by every acknowledged write. An entry exists
// only after a successful List, so the first write for a registry after a start is always
// planned against the store's real content. Any failed or conflicting write drops the entry,
// forcing a fresh List.
type knownRecords struct {
	mu sync.Mutex
	// entries are keyed by registry, then by store name ("" for a single store).
	entries map[types.NamespacedName]map[string]knownEntry
}

type knownEntry struct {
	uid     types.UID
	scope   store.Scope
	records map[string]store.Record // every record of the scope, keyed by pod
}

func newKnownRecords() *knownRecords {
	return &knownRecords{entries: map[types.NamespacedName]map[string]knownEntry{}}
}

// get returns a copy of the records known for the registry in scope in one store, or false.
func (k *knownRecords) get(name types.NamespacedName, storeName string, uid types.UID, scope store.Scope) (map[string]store.Record, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.entries[name][storeName]
	if !ok || e.uid != uid || e.scope != scope {
		return nil, false
	}
	out := make(map[string]store.Record, len(e.records))
	for pod, r := range e.records {
		out[pod] = r
	}
	return out, true
}

func (k *knownRecords) set(name types.NamespacedName, storeName string, uid types.UID, scope store.Scope, records map[string]store.Record) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.entries[name] == nil {
		k.entries[name] = map[string]knownEntry{}
	}
	k.entries[name][storeName] = knownEntry{uid: uid, scope: scope, records: records}
}

// forget drops what is known of the registry in every store.
func (k *knownRecords) forget(name types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.entries, name)
}

// forgetStore drops what is known of the registry in one store.
func (k *knownRecords) forgetStore(name types.NamespacedName, storeName string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.entries[name], storeName)
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
