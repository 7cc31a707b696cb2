package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// wireBytes counts the bytes a gRPC client connection receives (message payloads as they
// came over the wire) from the store: what the discovery watchers' etcd clients read.
type wireBytes struct{ n atomic.Int64 }

func (w *wireBytes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (w *wireBytes) HandleRPC(_ context.Context, s stats.RPCStats) {
	if p, ok := s.(*stats.InPayload); ok {
		w.n.Add(int64(p.WireLength))
	}
}
func (w *wireBytes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (w *wireBytes) HandleConn(context.Context, stats.ConnStats)                       {}

// observer receives what observers of a group have: the tracker, or in the watchers'
// process the aggregate that tells the tracker when every watcher has a change.
type observer interface {
	observe(g group, pod string, k kind, at time.Time)
}

// watchersPerConn is how many discovery watchers share one etcd client (connection); each
// still has watch streams of its own (pkg/discovery opens one per client) and receives every
// event of its service.
const watchersPerConn = 50

// watcher is one pkg/discovery Client of the service and its Subscription.
type watcher struct {
	c   *discovery.Client
	sub *discovery.Subscription
}

// pods are the pods the watcher's client lists.
func (w *watcher) pods() []string {
	all := w.c.All()
	out := make([]string, len(all))
	for i, inst := range all {
		out[i] = inst.Pod
	}
	return out
}

// watchers are the discovery watchers of the run.
type watchers struct {
	clis  []*clientv3.Client
	ws    []*watcher
	bytes wireBytes
	wg    sync.WaitGroup
}

// startWatchers starts n watchers, watchersPerConn at a time, each group once the previous
// one has listed the service (callers do not all start in the same second; 1,000 lists of
// 2,000 keys at once time out in the store).
func startWatchers(ctx context.Context, endpoint, service, namespace string, n int, t observer, timeout time.Duration) (*watchers, error) {
	ws := &watchers{}
	for i := range n {
		if i%watchersPerConn == 0 {
			if err := ws.waitSynced(ctx, timeout); err != nil {
				ws.stop()
				return nil, err
			}
			cli, err := clientv3.New(clientv3.Config{
				Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second,
				DialOptions: []grpc.DialOption{grpc.WithStatsHandler(&ws.bytes)},
				Logger:      zap.NewNop(), // a loaded machine's retries would fill the run's output
			})
			if err != nil {
				ws.stop()
				return nil, fmt.Errorf("store client: %w", err)
			}
			ws.clis = append(ws.clis, cli)
		}
		c, err := discovery.New(discovery.Config{Client: ws.clis[len(ws.clis)-1], Service: service, Namespace: namespace})
		if err != nil {
			ws.stop()
			return nil, err
		}
		w := &watcher{c: c, sub: c.Subscribe()}
		ws.ws = append(ws.ws, w)
		ws.wg.Go(func() { w.follow(ctx, t) })
	}
	return ws, ws.waitSynced(ctx, timeout)
}

// waitSynced waits for every watcher started so far to have listed the service.
func (ws *watchers) waitSynced(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i, w := range ws.ws {
		if err := w.c.WaitSynced(ctx); err != nil {
			return fmt.Errorf("watcher %d of %d did not list the service: %w", i+1, len(ws.ws), err)
		}
	}
	return nil
}

// follow applies each change of the watcher's list as a caller reacting to it would.
func (w *watcher) follow(ctx context.Context, t observer) {
	for {
		ch, err := w.sub.Next(ctx)
		if err != nil {
			return
		}
		at := time.Now()
		for _, inst := range ch.Added {
			t.observe(groupWatchers, inst.Pod, ready, at)
		}
		for _, inst := range ch.Removed {
			t.observe(groupWatchers, inst.Pod, terminating, at)
		}
	}
}

func (ws *watchers) stop() {
	for _, w := range ws.ws {
		w.sub.Close()
		_ = w.c.Close()
	}
	ws.wg.Wait()
	for _, c := range ws.clis {
		_ = c.Close()
	}
}

// floorWatch is the API watch floor: a plain watch of the namespace's pods on a connection
// of its own, what any controller pays before it can act. A pod whose Ready condition turns
// True is a ready transition; one whose deletion starts a terminating one.
func floorWatch(ctx context.Context, kube kubernetes.Interface, namespace string, t *tracker) error {
	list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	rv := list.ResourceVersion
	go func() {
		for ctx.Err() == nil {
			w, err := kube.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(100 * time.Millisecond) // retry pacing after a failed watch
				continue
			}
			for ev := range w.ResultChan() {
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = pod.ResourceVersion
				at := time.Now()
				switch {
				case ev.Type == watch.Bookmark:
				case pod.DeletionTimestamp != nil || ev.Type == watch.Deleted:
					t.observe(groupFloor, pod.Name, terminating, at)
				case podReady(pod):
					t.observe(groupFloor, pod.Name, ready, at)
				}
			}
			w.Stop()
		}
	}()
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
