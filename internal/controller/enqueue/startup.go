package enqueue

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// When the operator starts (a restart, a leader fail-over), every registry is enqueued by the
// initial list at low priority, most of them for a check: their pods are ready and
// registered. A pod deleted while no operator ran is in no list: its registry is found here,
// once the workers start, from what its status last reported registered, and enqueued at the
// default priority, which raises its queued request.

// Startup is the triage of the initial list (a manager Runnable, run by the leader). Started
// is called by the first reconcile: the controller starts its workers once every source
// delivered its initial list, so the cache holds every pod by then.
type Startup struct {
	// Client lists the pods and the registries from the cache.
	Client client.Reader
	// Events is the channel the controller watches (source.Channel) for the registries to
	// reconcile first.
	Events chan event.GenericEvent

	once    sync.Once
	started chan struct{}
}

// NewStartup returns the triage of the initial list.
func NewStartup(c client.Reader) *Startup {
	return &Startup{Client: c, Events: make(chan event.GenericEvent), started: make(chan struct{})}
}

// Started tells the triage that the workers run; only its first call counts.
func (s *Startup) Started() { s.once.Do(func() { close(s.started) }) }

// NeedLeaderElection: the triage feeds the controller, which runs on the leader.
func (s *Startup) NeedLeaderElection() bool { return true }

// Start waits for the workers, then sends the registries with a registered pod gone.
func (s *Startup) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-s.started:
	}
	regs, err := s.registriesWithPodsGone(ctx)
	if err != nil {
		// Not fatal: every registry is queued anyway, at low priority.
		log.FromContext(ctx).Error(err, "startup triage: the registries whose pods went while no operator ran are reconciled in turn")
		return nil
	}
	for _, reg := range regs {
		select {
		case s.Events <- event.GenericEvent{Object: reg}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

func (s *Startup) registriesWithPodsGone(ctx context.Context) ([]*v1beta1.ServiceRegistry, error) {
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	uids := make(map[types.NamespacedName]types.UID, len(pods.Items))
	for i := range pods.Items {
		uids[client.ObjectKeyFromObject(&pods.Items[i])] = pods.Items[i].UID
	}
	var regs v1beta1.ServiceRegistryList
	if err := s.Client.List(ctx, &regs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []*v1beta1.ServiceRegistry
	for i := range regs.Items {
		if RegisteredPodGone(&regs.Items[i], uids) {
			out = append(out, &regs.Items[i])
		}
	}
	return out, nil
}

// RegisteredPodGone tells whether the registry's status reports a pod Registered that pods
// (the cache's, name → UID) no longer holds, or holds as another pod of the same name. The
// status lists at most 256 endpoints: the others are found by the registry's check.
func RegisteredPodGone(reg *v1beta1.ServiceRegistry, pods map[types.NamespacedName]types.UID) bool {
	for _, e := range reg.Status.Endpoints {
		if e.State != v1beta1.EndpointRegistered {
			continue
		}
		if uid, ok := pods[types.NamespacedName{Namespace: reg.Namespace, Name: e.Pod}]; !ok || string(uid) != e.UID {
			return true
		}
	}
	return false
}
