package controlplane

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/bench/controlplane/watchgap"
	etcdstore "github.com/registrar-dev/registrar/internal/store/etcd"
)

// podOfKey is the namespace/name of the pod at {prefix}/{service}/{namespace}/{pod}.
func podOfKey(key string) (string, bool) {
	parts := strings.Split(strings.Trim(key, "/"), "/")
	if len(parts) < 2 {
		return "", false
	}
	return parts[len(parts)-2] + "/" + parts[len(parts)-1], true
}

// operatorOwn reports whether key is the operator's own bookkeeping under the prefix (its
// write fence, {prefix}/.registrar/...), not an endpoint.
func operatorOwn(prefix, key string) bool {
	return strings.HasPrefix(key, strings.TrimSuffix(prefix, "/")+"/"+etcdstore.FenceDir+"/")
}

// storeWatch is a timing watch of the store keys under prefix: a key created is a
// registration, a key deleted (or whose lease expired) a deregistration, a key rewritten an
// unexpected write. It survives the watch's end (it resumes after the last revision it
// processed) and a compacted revision (it reads the keys again; what changed in the gap is
// unmeasured).
type storeWatch struct {
	cli    *clientv3.Client
	prefix string
	t      observer
	f      watchFaults
	// keys are the endpoint keys that exist as of next-1.
	keys map[string]bool
	next int64
}

// startStoreWatch reads the keys under prefix at revision rev and returns the watch of every
// change after it (run it until ctx ends).
func startStoreWatch(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, t observer, f watchFaults) (func() error, error) {
	w := &storeWatch{cli: cli, prefix: prefix, t: t, f: f}
	keys, _, err := w.list(ctx, rev)
	if err != nil {
		return nil, err
	}
	w.keys, w.next = keys, rev+1
	return func() error { return w.run(ctx) }, nil
}

// list reads the endpoint keys under the prefix at rev (0: now) and the revision read.
func (w *storeWatch) list(ctx context.Context, rev int64) (map[string]bool, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := w.cli.Get(ctx, w.prefix, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("list store keys under %s: %w", w.prefix, err)
	}
	keys := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if !operatorOwn(w.prefix, string(kv.Key)) {
			keys[string(kv.Key)] = true
		}
	}
	return keys, resp.Header.Revision, nil
}

func (w *storeWatch) run(ctx context.Context) error {
	failures := 0
	for ctx.Err() == nil {
		step, pause, failed := w.consume(ctx)
		if ctx.Err() != nil {
			break
		}
		if step == watchgap.Relist {
			w.relist(ctx, pause)
			failures = 0
			continue
		}
		w.t.Resumed()
		failures = backOff(ctx, failed, failures)
	}
	return ctx.Err()
}

// consume watches from w.next until the watch ends, fails, a fault arrives or ctx ends.
func (w *storeWatch) consume(ctx context.Context) (next watchgap.Step, pause time.Duration, failed bool) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := w.cli.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(w.next))
	for {
		select {
		case <-ctx.Done():
			return watchgap.Resume, 0, false
		case <-w.f.cut:
			return watchgap.Resume, 0, false
		case <-w.f.relist:
			return watchgap.Relist, w.f.pause, false
		case resp, ok := <-ch:
			switch {
			case !ok:
				return watchgap.Resume, 0, false
			case resp.CompactRevision != 0:
				logWatch("store watch of %s: revision %d compacted (at %d): listing again", w.prefix, w.next, resp.CompactRevision)
				return watchgap.Relist, 0, false
			case resp.Err() != nil:
				logWatch("store watch of %s: %v: resuming from revision %d", w.prefix, resp.Err(), w.next)
				return watchgap.Resume, 0, true
			}
			w.handle(resp.Events, time.Now())
		}
	}
}

func (w *storeWatch) handle(events []*clientv3.Event, now time.Time) {
	for _, ev := range events {
		w.next = ev.Kv.ModRevision + 1
		key := string(ev.Kv.Key)
		if operatorOwn(w.prefix, key) {
			continue
		}
		if ev.Type == clientv3.EventTypeDelete {
			delete(w.keys, key)
		} else {
			w.keys[key] = true
		}
		w.t.Write()
		pod, ok := podOfKey(key)
		switch {
		case !ok:
			w.t.Unexpected()
		case ev.Type == clientv3.EventTypeDelete:
			w.t.Observe(pod, Deregister, now)
		case ev.Kv.CreateRevision == ev.Kv.ModRevision:
			w.t.Observe(pod, Register, now)
		default:
			w.t.Unexpected() // a rewrite of a key that exists
		}
	}
}

// relist reads the keys again (after pause, a fault's gap) until it succeeds or ctx ends,
// reports the keys created and deleted since the watch's position as unmeasured, and moves
// the position to the read.
func (w *storeWatch) relist(ctx context.Context, pause time.Duration) {
	w.t.Relisted()
	sleepCtx(ctx, pause)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		keys, rev, err := w.list(ctx, 0)
		if err != nil {
			logWatch("store watch: %v", err)
			sleepCtx(ctx, watchgap.Backoff(attempt))
			continue
		}
		created, deleted := watchgap.Diff(w.keys, keys)
		for _, k := range created {
			if pod, ok := podOfKey(k); ok {
				w.t.Gap(pod, Register)
			}
		}
		for _, k := range deleted {
			if pod, ok := podOfKey(k); ok {
				w.t.Gap(pod, Deregister)
			}
		}
		w.keys, w.next = keys, rev+1
		return
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// logWatch reports what a timing watch did (to the watcher process's log).
func logWatch(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench watcher: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// storeRevision is the store's current revision.
func storeRevision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "bench-revision")
	if err != nil {
		return 0, fmt.Errorf("read store revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// managedBy selects the EndpointSlices of kube-controller-manager's controller.
const managedBy = discoveryv1.LabelManagedBy + "=endpointslice-controller.k8s.io"

// sliceView tracks which pods the EndpointSlices list as ready; a pod counts as in the
// registry while any slice lists it ready.
type sliceView struct {
	slices map[string]map[string]bool // slice namespace/name -> ready pods (namespace/name)
	ready  map[string]int             // pod -> slices listing it ready
}

func newSliceView() *sliceView {
	return &sliceView{slices: map[string]map[string]bool{}, ready: map[string]int{}}
}

// readyPods are the pods a slice lists with conditions.ready true.
func readyPods(s *discoveryv1.EndpointSlice) map[string]bool {
	out := map[string]bool{}
	for _, ep := range s.Endpoints {
		if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
			continue
		}
		out[s.Namespace+"/"+ep.TargetRef.Name] = true
	}
	return out
}

// apply records a slice's new ready pods (nil: the slice is gone) and returns the pods that
// entered and left the registry.
func (v *sliceView) apply(slice string, pods map[string]bool) (added, removed []string) {
	old := v.slices[slice]
	for pod := range pods {
		if !old[pod] {
			if v.ready[pod]++; v.ready[pod] == 1 {
				added = append(added, pod)
			}
		}
	}
	for pod := range old {
		if !pods[pod] {
			if v.ready[pod]--; v.ready[pod] == 0 {
				delete(v.ready, pod)
				removed = append(removed, pod)
			}
		}
	}
	if pods == nil {
		delete(v.slices, slice)
	} else {
		v.slices[slice] = pods
	}
	return added, removed
}

// watchTimeout is how long the API server keeps one timing watch open (then it resumes).
const watchTimeout = 5 * time.Minute

// listTimeout bounds one list of a timing watch (20,000 pods from an overloaded API server).
const listTimeout = 2 * time.Minute

// apiWatch is a timing watch of one API resource that survives the watch's end: after a
// watch that closed (the server ended it, a connection dropped) it resumes from the last
// resourceVersion it processed; when that is gone (410 Gone, Expired) it lists again, hands
// every change it finds against what it knew to the observer as unmeasured (Gap), and
// resumes from the list.
type apiWatch struct {
	what  string
	watch func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
	// relist lists the resource, reports what changed against the watch's state as gaps,
	// takes the list as the state and returns its resourceVersion.
	relist func(ctx context.Context) (string, error)
	handle func(ev watch.Event, now time.Time)
	t      observer
	f      watchFaults
}

func (a *apiWatch) run(ctx context.Context, rv string) error {
	failures := 0
	for ctx.Err() == nil {
		w, err := a.watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true,
			TimeoutSeconds: ptr.To(int64(watchTimeout.Seconds()))})
		var (
			step   watchgap.Step
			pause  time.Duration
			failed bool
		)
		if err != nil {
			step, failed = watchgap.OnError(err), true
			logWatch("%s watch from resourceVersion %s: %v: %s", a.what, rv, err, step)
		} else {
			step, pause, failed, rv = a.consume(ctx, w, rv)
			w.Stop()
		}
		if ctx.Err() != nil {
			break
		}
		if step == watchgap.Relist {
			rv = a.relistUntilDone(ctx, pause)
			failures = 0
			continue
		}
		if err == nil {
			a.t.Resumed()
		}
		failures = backOff(ctx, failed, failures)
	}
	return ctx.Err()
}

// consume hands w's events to handle until the watch ends, reports an error, a fault arrives
// or ctx ends; it returns the next step and the last resourceVersion processed.
func (a *apiWatch) consume(ctx context.Context, w watch.Interface, rv string) (next watchgap.Step, pause time.Duration, failed bool, last string) {
	for {
		select {
		case <-ctx.Done():
			return watchgap.Resume, 0, false, rv
		case <-a.f.cut:
			return watchgap.Resume, 0, false, rv
		case <-a.f.relist:
			return watchgap.Relist, a.f.pause, false, rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return watchgap.Resume, 0, false, rv
			}
			switch step := watchgap.OnEvent(ev); step {
			case watchgap.Handle:
				a.handle(ev, time.Now())
				rv = resourceVersionOf(ev.Object, rv)
			case watchgap.Skip:
				rv = resourceVersionOf(ev.Object, rv)
			default:
				logWatch("%s watch after resourceVersion %s: %v: %s", a.what, rv, apierrors.FromObject(ev.Object), step)
				return step, 0, true, rv
			}
		}
	}
}

// relistUntilDone lists (after pause, a fault's gap) until a list succeeds or ctx ends.
func (a *apiWatch) relistUntilDone(ctx context.Context, pause time.Duration) string {
	a.t.Relisted()
	sleepCtx(ctx, pause)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		rv, err := a.relist(ctx)
		if err == nil {
			return rv
		}
		logWatch("%s relist: %v", a.what, err)
		sleepCtx(ctx, watchgap.Backoff(attempt))
	}
	return ""
}

func resourceVersionOf(obj runtime.Object, old string) string {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetResourceVersion() == "" {
		return old
	}
	return m.GetResourceVersion()
}

// startSliceWatch lists the EndpointSlices and returns the watch of every change after the
// list (run it until ctx ends).
func startSliceWatch(ctx context.Context, kube kubernetes.Interface, t observer, f watchFaults) (func() error, error) {
	view, rv, _, err := listSlices(ctx, kube)
	if err != nil {
		return nil, err
	}
	a := &apiWatch{what: "EndpointSlices", t: t, f: f,
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = managedBy
			return kube.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
		},
		handle: func(ev watch.Event, now time.Time) { sliceEvent(view, ev, t, now) },
		relist: func(ctx context.Context) (string, error) {
			fresh, rv, _, err := listSlices(ctx, kube)
			if err != nil {
				return "", err
			}
			view.resync(fresh, t)
			return rv, nil
		},
	}
	return func() error { return a.run(ctx, rv) }, nil
}

// resync makes v the freshly listed view, reporting the pods that entered and left the
// registry in the gap to t.
func (v *sliceView) resync(fresh *sliceView, t observer) {
	var entered, left []string
	for name := range v.slices {
		if _, ok := fresh.slices[name]; !ok {
			a, r := v.apply(name, nil)
			entered, left = append(entered, a...), append(left, r...)
		}
	}
	for name, pods := range fresh.slices {
		a, r := v.apply(name, pods)
		entered, left = append(entered, a...), append(left, r...)
	}
	// A pod that moved between slices entered one and left another: only the net change counts.
	net := map[string]int{}
	for _, p := range entered {
		net[p]++
	}
	for _, p := range left {
		net[p]--
	}
	for _, p := range slices.Sorted(maps.Keys(net)) {
		switch {
		case net[p] > 0:
			t.Gap(p, Register)
		case net[p] < 0:
			t.Gap(p, Deregister)
		}
	}
}

func sliceEvent(view *sliceView, ev watch.Event, t observer, now time.Time) {
	s, ok := ev.Object.(*discoveryv1.EndpointSlice)
	if !ok {
		return // a bookmark or an error status; the retry watcher resumes
	}
	t.Write()
	pods := readyPods(s)
	if ev.Type == watch.Deleted {
		pods = nil
	}
	added, removed := view.apply(s.Namespace+"/"+s.Name, pods)
	for _, p := range added {
		t.Observe(p, Register, now)
	}
	for _, p := range removed {
		t.Observe(p, Deregister, now)
	}
}

// listSlices loads the current EndpointSlices into a new view and returns the list's
// resourceVersion, where watchSlices starts.
func listSlices(ctx context.Context, kube kubernetes.Interface) (*sliceView, string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	list, err := kube.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{LabelSelector: managedBy})
	if err != nil {
		return nil, "", 0, fmt.Errorf("list EndpointSlices: %w", err)
	}
	view := newSliceView()
	endpoints := 0
	for i := range list.Items {
		s := &list.Items[i]
		view.apply(s.Namespace+"/"+s.Name, readyPods(s))
		endpoints += len(s.Endpoints)
	}
	return view, list.ResourceVersion, endpoints, nil
}

// startPodWatch lists the pods and returns the watch of every change after the list (run it
// until ctx ends), fed into t: the API server's pod watch, the baseline every controller pays
// (the write committed, then delivered to a watcher). Ready pods count as registered.
func startPodWatch(ctx context.Context, kube kubernetes.Interface, t observer, f watchFaults) (func() error, error) {
	state, rv, err := listPods(ctx, kube)
	if err != nil {
		return nil, err
	}
	a := &apiWatch{what: "pods", t: t, f: f,
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().Pods("").Watch(ctx, o)
		},
		handle: func(ev watch.Event, now time.Time) {
			podEvent(ev, t, now)
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				id := pod.Namespace + "/" + pod.Name
				if ev.Type == watch.Deleted {
					delete(state, id)
				} else {
					state[id] = podRegistered(pod)
				}
			}
		},
		relist: func(ctx context.Context) (string, error) {
			fresh, rv, err := listPods(ctx, kube)
			if err != nil {
				return "", err
			}
			entered, left := watchgap.Diff(state, fresh)
			for _, id := range entered {
				t.Gap(id, Register)
			}
			for _, id := range left {
				t.Gap(id, Deregister)
			}
			state = fresh
			return rv, nil
		},
	}
	return func() error { return a.run(ctx, rv) }, nil
}

// listPods lists every pod: which are registered (ready, not being deleted), and the list's
// resourceVersion.
func listPods(ctx context.Context, kube kubernetes.Interface) (map[string]bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	list, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("list pods: %w", err)
	}
	state := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		state[p.Namespace+"/"+p.Name] = podRegistered(p)
	}
	return state, list.ResourceVersion, nil
}

// podRegistered: a pod is in the registry while it is ready and not being deleted.
func podRegistered(pod *corev1.Pod) bool { return pod.DeletionTimestamp == nil && podReady(pod) }

func podEvent(ev watch.Event, t observer, now time.Time) {
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	id := pod.Namespace + "/" + pod.Name
	switch {
	case ev.Type == watch.Deleted || pod.DeletionTimestamp != nil:
		t.ObserveIfPending(id, Deregister, now) // a delete shows as deletionTimestamp set, then gone
	case ev.Type != watch.Modified:
		t.Unexpected()
	case podReady(pod):
		t.Observe(id, Register, now)
	default:
		t.Observe(id, Deregister, now)
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// backOff waits before the next attempt of a watch after a failed one (longer with each
// consecutive failure) and returns the new count of consecutive failures.
func backOff(ctx context.Context, failed bool, failures int) int {
	if !failed {
		return 0
	}
	sleepCtx(ctx, watchgap.Backoff(failures))
	return failures + 1
}
