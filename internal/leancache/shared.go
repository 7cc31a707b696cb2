package leancache

import (
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// What many cached pods repeat — a ReplicaSet's labels, its containers' named ports, the
// namespace, registrar's annotations — is kept once for all of them: the transform looks
// each up in a table of values seen before and keeps the one found. A cached object is
// never modified (the operator reads the cache without copying, and writes patches built
// from scratch), so pods may share a map or a slice.
//
// A table is bounded by two generations: when the current one holds maxShared values it
// becomes the previous one and a new one starts; a value found in the previous one moves to
// the current. A value no pod brought for a whole generation is dropped from the table (the
// pods holding it keep it), so a cluster whose label sets never repeat (StatefulSet pods'
// own names) costs at most 2·maxShared entries, not one per pod ever seen.
const maxShared = 4096

type table[V any] struct {
	mu        sync.Mutex
	cur, prev map[string]V
}

// get returns the value stored under key, else stores and returns v.
func (t *table[V]) get(key []byte, v V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if got, ok := t.cur[string(key)]; ok { // no allocation for the lookup
		return got
	}
	if got, ok := t.prev[string(key)]; ok {
		v = got
	}
	return t.store(string(key), v)
}

// getString is get for a key that is already a string.
func (t *table[V]) getString(key string, v V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if got, ok := t.cur[key]; ok {
		return got
	}
	if got, ok := t.prev[key]; ok {
		v = got
	}
	return t.store(key, v)
}

// store puts v in the current generation, starting a new one when it is full; t.mu held.
func (t *table[V]) store(key string, v V) V {
	if t.cur == nil || len(t.cur) >= maxShared {
		t.prev, t.cur = t.cur, make(map[string]V, 64)
	}
	t.cur[key] = v
	return v
}

// appendString appends s, length-prefixed, so that no two sequences of strings share a key.
func appendString(key []byte, s string) []byte {
	return append(append(strconv.AppendInt(key, int64(len(s)), 10), ':'), s...)
}

var (
	sharedMaps       table[map[string]string]
	sharedContainers table[[]corev1.Container]
	sharedStrings    table[string]
	keyBuffers       = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}
)

// sharedMap returns a map equal to m kept for every pod that has one (m itself the first
// time); nil for an empty map.
func sharedMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	bp := keyBuffers.Get().(*[]byte)
	defer keyBuffers.Put(bp)
	key := (*bp)[:0]
	var keys [16]string
	ks := keys[:0]
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		key = appendString(appendString(key, k), m[k])
	}
	*bp = key
	return sharedMaps.get(key, m)
}

// sharedContainerList returns a slice equal to cs (containers as containerPorts keeps
// them: name, restartPolicy, named ports) kept for every pod that has one.
func sharedContainerList(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	bp := keyBuffers.Get().(*[]byte)
	defer keyBuffers.Put(bp)
	key := (*bp)[:0]
	for _, c := range cs {
		key = appendString(key, c.Name)
		if c.RestartPolicy != nil {
			key = appendString(append(key, 'r'), string(*c.RestartPolicy))
		}
		for _, p := range c.Ports {
			key = append(strconv.AppendInt(appendString(append(key, 'p'), p.Name), int64(p.ContainerPort), 10), ',')
		}
		key = append(key, ';')
	}
	*bp = key
	return sharedContainers.get(key, cs)
}

// sharedString returns a string equal to s kept for every pod that has one.
func sharedString(s string) string {
	if s == "" {
		return ""
	}
	return sharedStrings.getString(s, s)
}
