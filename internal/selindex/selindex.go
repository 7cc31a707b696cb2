// Package selindex maps pods to the ServiceRegistries whose label selectors select them,
// and each registry to its pods, per namespace, so that the work of one pod event or one
// reconcile is proportional to the pods and registries it concerns, not to the namespace
// (issue 16, item 1).
//
// The index is fed by the operator's pod event handler (SetPod, DeletePod) and by the
// reconcile of each registry (SetRegistry, DeleteRegistry). A registry is anchored under one
// label pair of its matchLabels (every pod it selects carries that pair), so a pod event
// evaluates only the selectors anchored under the pod's own labels, plus the rare selectors
// made only of matchExpressions. Pods are indexed under each of their label pairs, so a new
// or changed selector evaluates only the pods carrying its anchor pair.
//
// Selection follows Selects: an empty selector selects nothing; a selector with
// matchExpressions selects only when it parses; plain matchLabels compare directly.
package selindex

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Selects reports whether a registry's selector selects a pod's labels; an empty or
// invalid selector selects nothing. Plain matchLabels, the common case, are compared
// directly rather than by building a labels.Selector.
func Selects(ls *metav1.LabelSelector, podLabels map[string]string) bool {
	if len(ls.MatchExpressions) > 0 {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		return err == nil && !sel.Empty() && sel.Matches(labels.Set(podLabels))
	}
	if len(ls.MatchLabels) == 0 {
		return false
	}
	for k, v := range ls.MatchLabels {
		if got, ok := podLabels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// pair is one label, key and value: the unit pods and registries are indexed by.
type pair struct{ k, v string }

type set = map[string]struct{}

// Index is safe for concurrent use.
type Index struct {
	mu sync.RWMutex
	ns map[string]*namespace
}

// Stats count the work the index did in one namespace, for tests and diagnostics.
type Stats struct {
	// SelectorsEvaluated is how many times a registry's selector was matched against a
	// pod's labels (by SetPod and SetRegistry).
	SelectorsEvaluated int64
	// PodsListed is how many pod names PodsOf returned.
	PodsListed int64
	// PodEvents is how many times SetPod and DeletePod were called, and Reached the sum of
	// the registries they returned (those a pod event enqueues).
	PodEvents, Reached int64
}

type namespace struct {
	regs map[string]*registry
	// anchored holds the registries anchored under each label pair.
	anchored map[pair]set
	// unanchored holds the registries with matchExpressions only: evaluated for every pod.
	unanchored set
	pods       map[string]*pod
	// byLabel holds the pods carrying each label pair.
	byLabel map[pair]set

	evaluated, listed, events, reached atomic.Int64
}

type registry struct {
	selector metav1.LabelSelector
	anchor   *pair // nil: unanchored, or (with an empty selector) selecting nothing
	pods     set
}

type pod struct {
	labels map[string]string // the cache's map: never modified
	regs   []string          // the registries selecting it, usually one
}

// New returns an empty index.
func New() *Index { return &Index{ns: map[string]*namespace{}} }

func (x *Index) namespace(ns string) *namespace {
	n, ok := x.ns[ns]
	if !ok {
		n = &namespace{regs: map[string]*registry{}, anchored: map[pair]set{}, unanchored: set{},
			pods: map[string]*pod{}, byLabel: map[pair]set{}}
		x.ns[ns] = n
	}
	return n
}

// gc drops a namespace that holds nothing any more.
func (x *Index) gc(ns string, n *namespace) {
	if len(n.regs) == 0 && len(n.pods) == 0 {
		delete(x.ns, ns)
	}
}

// SetPod records a pod's labels (the map is kept, not copied: the caller never modifies
// it) and returns, sorted, the registries that selected it before or select it now: those
// a pod event concerns.
func (x *Index) SetPod(ns, name string, podLabels map[string]string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.namespace(ns)
	n.events.Add(1)
	p, ok := n.pods[name]
	var before []string
	if ok {
		if maps.Equal(p.labels, podLabels) {
			// Same labels, same registries (a changed selector updates p.regs itself):
			// a status-only pod event costs no selector evaluation.
			p.labels = podLabels
			n.reached.Add(int64(len(p.regs)))
			return slices.Clone(p.regs)
		}
		before = p.regs
		n.unindexPod(name, p)
		p.labels = podLabels
		n.indexPod(name, p)
	} else {
		p = &pod{labels: podLabels}
		n.pods[name] = p
		n.indexPod(name, p)
	}
	now := n.selecting(podLabels)
	for _, r := range before {
		if !slices.Contains(now, r) {
			delete(n.regs[r].pods, name)
		}
	}
	for _, r := range now {
		n.regs[r].pods[name] = struct{}{}
	}
	p.regs = now
	out := union(before, now)
	n.reached.Add(int64(len(out)))
	return out
}

// DeletePod forgets a pod and returns, sorted, the registries that selected it.
func (x *Index) DeletePod(ns, name string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	n, ok := x.ns[ns]
	if !ok {
		return nil
	}
	n.events.Add(1)
	p, ok := n.pods[name]
	if !ok {
		return nil
	}
	n.reached.Add(int64(len(p.regs)))
	for _, r := range p.regs {
		delete(n.regs[r].pods, name)
	}
	n.unindexPod(name, p)
	delete(n.pods, name)
	x.gc(ns, n)
	return slices.Clone(p.regs)
}

// RegistriesOf returns, sorted, the registries that select the pod as the index knows it.
func (x *Index) RegistriesOf(ns, name string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if n, ok := x.ns[ns]; ok {
		if p, ok := n.pods[name]; ok {
			return slices.Clone(p.regs)
		}
	}
	return nil
}

// SetRegistry records a registry's selector. When it differs from the one recorded (or the
// registry is new), the registry's pods are recomputed from the pods carrying its anchor
// pair (all the namespace's pods for a selector of matchExpressions only); otherwise
// nothing is done. It reports whether the selector changed.
func (x *Index) SetRegistry(ns, name string, sel *metav1.LabelSelector) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.namespace(ns)
	if r, ok := n.regs[name]; ok {
		if equalSelectors(&r.selector, sel) {
			return false
		}
		n.removeRegistry(name, r)
	}
	r := &registry{selector: *sel.DeepCopy(), pods: set{}}
	n.regs[name] = r
	switch {
	case len(sel.MatchLabels) > 0:
		k := slices.Min(slices.Collect(maps.Keys(sel.MatchLabels)))
		r.anchor = &pair{k, sel.MatchLabels[k]}
		addTo(n.anchored, *r.anchor, name)
		for p := range n.byLabel[*r.anchor] {
			n.match(r, name, p, n.pods[p])
		}
	case len(sel.MatchExpressions) > 0:
		n.unanchored[name] = struct{}{}
		for p, pd := range n.pods {
			n.match(r, name, p, pd)
		}
	}
	// An empty selector selects nothing: the registry is known, with no pods.
	return true
}

// match adds the pod to the registry when its selector selects it.
func (n *namespace) match(r *registry, regName, podName string, p *pod) {
	n.evaluated.Add(1)
	if Selects(&r.selector, p.labels) {
		r.pods[podName] = struct{}{}
		i, _ := slices.BinarySearch(p.regs, regName)
		p.regs = slices.Insert(p.regs, i, regName)
	}
}

// DeleteRegistry forgets a registry.
func (x *Index) DeleteRegistry(ns, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n, ok := x.ns[ns]
	if !ok {
		return
	}
	if r, ok := n.regs[name]; ok {
		n.removeRegistry(name, r)
		x.gc(ns, n)
	}
}

func (n *namespace) removeRegistry(name string, r *registry) {
	for p := range r.pods {
		if pd, ok := n.pods[p]; ok {
			pd.regs = slices.DeleteFunc(slices.Clone(pd.regs), func(s string) bool { return s == name })
		}
	}
	if r.anchor != nil {
		removeFrom(n.anchored, *r.anchor, name)
	}
	delete(n.unanchored, name)
	delete(n.regs, name)
}

// PodsOf returns, sorted, the pods the registry selects; false when the registry is not
// in the index (SetRegistry was not called for it).
func (x *Index) PodsOf(ns, name string) ([]string, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n, ok := x.ns[ns]
	if !ok {
		return nil, false
	}
	r, ok := n.regs[name]
	if !ok {
		return nil, false
	}
	out := slices.Sorted(maps.Keys(r.pods))
	n.listed.Add(int64(len(out)))
	return out, true
}

// Matching returns, sorted, the pods of a namespace that a selector selects, without
// recording the selector: the pods carrying its anchor pair are evaluated (every pod of the
// namespace for a selector of matchExpressions only; none for an empty one). It is not
// counted in Stats, which count the work of pod events and reconciles.
func (x *Index) Matching(ns string, sel *metav1.LabelSelector) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n, ok := x.ns[ns]
	if !ok {
		return nil
	}
	var out []string
	check := func(name string, p *pod) {
		if Selects(sel, p.labels) {
			out = append(out, name)
		}
	}
	switch {
	case len(sel.MatchLabels) > 0:
		k := slices.Min(slices.Collect(maps.Keys(sel.MatchLabels)))
		for name := range n.byLabel[pair{k, sel.MatchLabels[k]}] {
			check(name, n.pods[name])
		}
	case len(sel.MatchExpressions) > 0:
		for name, p := range n.pods {
			check(name, p)
		}
	}
	slices.Sort(out)
	return out
}

// Stats returns the work counted in a namespace since it was first indexed (zero once the
// namespace holds nothing any more).
func (x *Index) Stats(ns string) Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n, ok := x.ns[ns]
	if !ok {
		return Stats{}
	}
	return Stats{SelectorsEvaluated: n.evaluated.Load(), PodsListed: n.listed.Load(),
		PodEvents: n.events.Load(), Reached: n.reached.Load()}
}

// selecting returns, sorted, the registries whose selectors select the labels: those
// anchored under one of the labels, and the unanchored ones.
func (n *namespace) selecting(podLabels map[string]string) []string {
	var out []string
	check := func(name string) {
		n.evaluated.Add(1)
		if Selects(&n.regs[name].selector, podLabels) {
			out = append(out, name)
		}
	}
	for k, v := range podLabels {
		for name := range n.anchored[pair{k, v}] {
			check(name)
		}
	}
	for name := range n.unanchored {
		check(name)
	}
	slices.Sort(out)
	return out
}

func (n *namespace) indexPod(name string, p *pod) {
	for k, v := range p.labels {
		addTo(n.byLabel, pair{k, v}, name)
	}
}

func (n *namespace) unindexPod(name string, p *pod) {
	for k, v := range p.labels {
		removeFrom(n.byLabel, pair{k, v}, name)
	}
}

func addTo(m map[pair]set, k pair, name string) {
	s, ok := m[k]
	if !ok {
		s = set{}
		m[k] = s
	}
	s[name] = struct{}{}
}

func removeFrom(m map[pair]set, k pair, name string) {
	if s, ok := m[k]; ok {
		delete(s, name)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// union merges two sorted lists without duplicates.
func union(a, b []string) []string {
	if len(a) == 0 {
		return slices.Clone(b)
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func equalSelectors(a, b *metav1.LabelSelector) bool {
	if !maps.Equal(a.MatchLabels, b.MatchLabels) || len(a.MatchExpressions) != len(b.MatchExpressions) {
		return false
	}
	for i := range a.MatchExpressions {
		x, y := a.MatchExpressions[i], b.MatchExpressions[i]
		if x.Key != y.Key || x.Operator != y.Operator || !slices.Equal(x.Values, y.Values) {
			return false
		}
	}
	return true
}

// Parsed remembers each registry's label selector as parsed by
// metav1.LabelSelectorAsSelector (which checks every key and value against regular
// expressions), so that the reconciles of a registry and of the registries it competes with
// parse it once per change of the selector rather than once per pod event. The answer is
// the parser's, error included; an entry is used only while the selector it was parsed from
// is equal to the one asked about. The zero value is ready to use; safe for concurrent use.
type Parsed struct {
	mu sync.Mutex
	m  map[types.NamespacedName]parsedSelector
}

type parsedSelector struct {
	from metav1.LabelSelector
	sel  labels.Selector
	err  error
}

// maxParsed bounds the entries of a Parsed: past it, the memory starts again (registries
// deleted without Forget cannot make it grow for ever).
const maxParsed = 1 << 14

// Of is metav1.LabelSelectorAsSelector(ls) for the registry name, remembered.
func (p *Parsed) Of(name types.NamespacedName, ls *metav1.LabelSelector) (labels.Selector, error) {
	p.mu.Lock()
	e, ok := p.m[name]
	p.mu.Unlock()
	if ok && equalSelectors(&e.from, ls) {
		return e.sel, e.err
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= maxParsed {
		p.m = map[types.NamespacedName]parsedSelector{}
	}
	p.m[name] = parsedSelector{from: *ls.DeepCopy(), sel: sel, err: err}
	return sel, err
}

// Forget drops what is remembered of a registry that is gone.
func (p *Parsed) Forget(name types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, name)
}
