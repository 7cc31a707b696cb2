package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// watchersPerConn is how many discovery watchers share one etcd client (connection); each
// still has watch streams of its own (pkg/discovery opens one per client) and receives every
// event of its service.
const watchersPerConn = 50

// watcher is one pkg/discovery Client of the service and what it holds.
type watcher struct {
	c   *discovery.Client
	sub *discovery.Subscription

	mu   sync.Mutex
	pods map[string]bool
}

func (w *watcher) count() (int, map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.pods))
	for p := range w.pods {
		out[p] = true
	}
	return len(w.pods), out
}

func (w *watcher) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pods)
}

// watchers are the discovery watchers of the run.
type watchers struct {
	clis  []*clientv3.Client
	ws    []*watcher
	bytes wireBytes
	wg    sync.WaitGroup
}

func startWatchers(ctx context.Context, endpoint, service, namespace string, n int, t *tracker) (*watchers, error) {
	ws := &watchers{}
	for i := range n {
		if i%watchersPerConn == 0 {
			cli, err := clientv3.New(clientv3.Config{
				Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second,
				DialOptions: []grpc.DialOption{grpc.WithStatsHandler(&ws.bytes)},
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
		w := &watcher{c: c, sub: c.Subscribe(), pods: map[string]bool{}}
		ws.ws = append(ws.ws, w)
		ws.wg.Go(func() { w.follow(ctx, t) })
	}
	return ws, nil
}

// follow applies each change of the watcher's list as a caller reacting to it would.
func (w *watcher) follow(ctx context.Context, t *tracker) {
	for {
		ch, err := w.sub.Next(ctx)
		if err != nil {
			return
		}
		at := time.Now()
		w.mu.Lock()
		for _, inst := range ch.Added {
			w.pods[inst.Pod] = true
		}
		for _, inst := range ch.Removed {
			delete(w.pods, inst.Pod)
		}
		w.mu.Unlock()
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
