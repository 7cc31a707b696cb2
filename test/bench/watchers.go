package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

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

// watchStore feeds every etcd event under prefix from revision rev into t: a key created is
// a registration, a key deleted (or whose lease expired) a deregistration, a key rewritten
// an unexpected write. It returns when ctx ends.
func watchStore(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, t observer, f watchFaults) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-wctx.Done():
		case <-f.cut:
		case <-f.relist:
		}
		cancel()
	}()
	for resp := range cli.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("watch %s: %w", prefix, err)
		}
		now := time.Now()
		for _, ev := range resp.Events {
			if operatorOwn(prefix, string(ev.Kv.Key)) {
				continue
			}
			t.Write()
			pod, ok := podOfKey(string(ev.Kv.Key))
			switch {
			case !ok:
				t.Unexpected()
			case ev.Type == clientv3.EventTypeDelete:
				t.Observe(pod, Deregister, now)
			case ev.Kv.CreateRevision == ev.Kv.ModRevision:
				t.Observe(pod, Register, now)
			default:
				t.Unexpected() // a rewrite of a key that exists
			}
		}
	}
	return ctx.Err()
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

// watchSlices feeds EndpointSlice changes from resourceVersion rv into t.
func watchSlices(ctx context.Context, kube kubernetes.Interface, view *sliceView, rv string, t observer, f watchFaults) error {
	return retryWatch(ctx, "EndpointSlices", rv, f, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = managedBy
		return kube.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
	}, func(ev watch.Event) { sliceEvent(view, ev, t, time.Now()) })
}

// retryWatch runs a watch from resourceVersion rv that resumes after errors, handing every
// event to handle, until ctx ends or the watch closes.
func retryWatch(ctx context.Context, what, rv string, f watchFaults, watchFunc cache.WatchFuncWithContext, handle func(watch.Event)) error {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: watchFunc})
	if err != nil {
		return fmt.Errorf("watch %s: %w", what, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.cut:
			w.Stop()
		case <-f.relist:
			w.Stop() // what the retry watcher does on 410 Gone
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("%s watch closed", what)
			}
			handle(ev)
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

// watchPods feeds the API server's pod watch into t: the baseline every controller pays (the
// write committed, then delivered to a watcher). Ready pods count as registered.
func watchPods(ctx context.Context, kube kubernetes.Interface, rv string, t observer, f watchFaults) error {
	return retryWatch(ctx, "pods", rv, f, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return kube.CoreV1().Pods("").Watch(ctx, o)
	}, func(ev watch.Event) { podEvent(ev, t, time.Now()) })
}

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

// podsResourceVersion is where the pod watch starts.
func podsResourceVersion(ctx context.Context, kube kubernetes.Interface) (string, error) {
	list, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	return list.ResourceVersion, nil
}
