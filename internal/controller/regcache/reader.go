// Package regcache is what the ServiceRegistry reconciler reads of the cluster, from the
// manager's cache and without deep copies (the objects are read-only): a registry's pods (the
// selector index's names, each read from the pod informer's own store), the registries of a
// service name in a namespace or in every namespace (the registry informer's own indexes:
// overlap and tenancy), and the zone of a node (metadata only). Setup registers the indexes
// and finds the informers' stores; without a manager (unit tests) everything is read through
// the client.
package regcache

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/selindex"
)

// ZoneLabel is the node label copied into each endpoint's zone field.
const ZoneLabel = corev1.LabelTopologyZone

// Reader reads the registries, pods and nodes the reconciler needs (see the package
// comment). Safe for concurrent use.
type Reader struct {
	client client.Client
	// index maps pods to the registries selecting them and back (nil: pods are listed from
	// the client by selector).
	index *selindex.Index
	// pods is the pod informer's store (Setup); nil reads pods through the client.
	pods podStore
	// registries is the ServiceRegistry informer's indexer (Setup); nil reads registries
	// through the client.
	registries registryIndexer
}

// podStore is the read the reconciler makes of the pod informer's store.
type podStore interface {
	GetByKey(key string) (item any, exists bool, err error)
}

// registryIndexer is the read SameService and ClaimsOf make of the registry informer's indexer.
type registryIndexer interface {
	ByIndex(indexName, indexedValue string) ([]any, error)
}

// New returns a Reader through c; index, when set, is the selector index the pod events feed.
func New(c client.Client, index *selindex.Index) *Reader { return &Reader{client: c, index: index} }

// Setup finds the pod informer's store and registers the registry informer's indexes (by
// namespace and service, and by service alone), else the cache's field index by service name:
// one index either way.
func (c *Reader) Setup(ctx context.Context, mgr ctrl.Manager) error {
	// The reconciler reads its pods from the pod informer's store (PodsOf), when the cache
	// gives one (a cache of all namespaces does; a multi-namespace one reads via the client).
	podInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	if st, ok := podInformer.(interface{ GetStore() toolscache.Store }); ok {
		c.pods = st.GetStore()
	}
	// The registries of a service are read from the registry informer's own index
	// (SameService) when the cache gives the informer's indexer, else listed through the
	// cache's field index: one index either way.
	regInformer, err := mgr.GetCache().GetInformer(ctx, &v1beta1.ServiceRegistry{})
	if err != nil {
		return fmt.Errorf("ServiceRegistry informer: %w", err)
	}
	if inf, ok := regInformer.(interface{ GetIndexer() toolscache.Indexer }); ok {
		if err := regInformer.AddIndexers(toolscache.Indexers{registryServiceIndex: indexRegistryByService,
			registryNameIndex: indexRegistryByName}); err != nil {
			return fmt.Errorf("index ServiceRegistries by namespace and service, and by service: %w", err)
		}
		c.registries = inf.GetIndexer()
	} else if err := mgr.GetFieldIndexer().IndexField(ctx, &v1beta1.ServiceRegistry{}, registryServiceField,
		registryServiceName); err != nil {
		return fmt.Errorf("index ServiceRegistries by service name: %w", err)
	}
	return nil
}

// Zone reads the zone label of a node; empty when unknown. Only the node's metadata is read,
// so the cache holds nodes as metadata only (a metadata-only watch): a Node's status (images,
// conditions, capacity) is large and never read.
func (c *Reader) Zone(ctx context.Context, node string) string {
	n := &metav1.PartialObjectMetadata{}
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	if err := c.client.Get(ctx, types.NamespacedName{Name: node}, n, client.UnsafeDisableDeepCopy); err != nil {
		return ""
	}
	return n.Labels[ZoneLabel]
}

// PodsOf reads the registry's pods from the cache: those the selector index holds for it,
// each read by name (so a reconcile reads its own pods, not the namespace's), and kept if the
// cached pod still matches (the cache may be a pod event ahead of the index: that event
// brings the registry back). Without an index, the pods are listed by selector. Read-only:
// the pods are classified and referenced, never modified (a warm-up copies its pod when it
// starts), so the cache's objects are read without deep copies (docs/development.md,
// "Benchmark history").
func (c *Reader) PodsOf(ctx context.Context, reg *v1beta1.ServiceRegistry, sel labels.Selector) ([]*corev1.Pod, error) {
	if c.index == nil {
		var list corev1.PodList
		if err := c.client.List(ctx, &list, client.InNamespace(reg.Namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list pods of %s/%s: %w", reg.Namespace, reg.Name, err)
		}
		pods := make([]*corev1.Pod, len(list.Items))
		for i := range list.Items {
			pods[i] = &list.Items[i]
		}
		return pods, nil
	}
	names, _ := c.index.PodsOf(reg.Namespace, reg.Name)
	pods := make([]*corev1.Pod, 0, len(names))
	for _, name := range names {
		pod, err := c.Pod(ctx, reg.Namespace, name)
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("get pod %s/%s of %s: %w", reg.Namespace, name, reg.Name, err)
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// cachedPod is the cache's own pod object (never to be modified): read from the pod
// informer's store when the reconciler has it (podStore: no allocation, no REST mapping per
// read), else through the client without a copy.
func (c *Reader) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	if c.pods != nil {
		obj, exists, err := c.pods.GetByKey(ns + "/" + name)
		if err != nil {
			return nil, err
		}
		if !exists {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			return pod, nil
		}
		return nil, fmt.Errorf("pod cache holds a %T", obj)
	}
	pod := &corev1.Pod{}
	if err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pod, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return pod, nil
}

// registryServiceField indexes ServiceRegistries by the service name they publish, so that
// the registries of one service are found without reading the namespace's.
const registryServiceField = "registrar.dev/service-name"

func registryServiceName(o client.Object) []string {
	reg, ok := o.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil
	}
	return []string{reg.ResolvedServiceName()}
}

// registryServiceIndex is the registry informer's own index by namespace and service name
// (registryServiceKey), read directly by SameService when the cache gives the informer's
// indexer.
const registryServiceIndex = "registrar.dev/namespace-service"

func registryServiceKey(ns, service string) string { return ns + "/" + service }

func indexRegistryByService(obj any) ([]string, error) {
	reg, ok := obj.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil, nil
	}
	return []string{registryServiceKey(reg.Namespace, reg.ResolvedServiceName())}, nil
}

// SameService returns the ServiceRegistries of a namespace publishing a service name, as the
// cache's own objects (read-only: never to be modified): from the registry informer's index
// when the reconciler has it (no REST mapping, no list built per call: it runs for every
// reconcile and every store change), else through the cache's field index, else (a plain
// client) by listing the namespace's and keeping those of the service.
func (c *Reader) SameService(ctx context.Context, ns, service string) ([]*v1beta1.ServiceRegistry, error) {
	return c.registriesOf(ctx, ns, service, registryServiceIndex, registryServiceKey(ns, service))
}

// registryNameIndex is the registry informer's index by service name alone (every
// namespace), read by claimsOf.
const registryNameIndex = "registrar.dev/service"

func indexRegistryByName(obj any) ([]string, error) {
	reg, ok := obj.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil, nil
	}
	return []string{reg.ResolvedServiceName()}, nil
}

// ClaimsOf returns the ServiceRegistries of every namespace publishing a service name, as
// the cache's own objects (read-only): from the registry informer's index, else through the
// cache's field index (registryServiceField, which controller-runtime also indexes across
// namespaces), else by listing every registry.
func (c *Reader) ClaimsOf(ctx context.Context, service string) ([]*v1beta1.ServiceRegistry, error) {
	return c.registriesOf(ctx, "", service, registryNameIndex, service)
}

// registriesOf is the registries publishing service, in namespace ns ("": every namespace),
// as the cache's own objects (read-only): from the registry informer's index (by key), else
// through the cache's field index, else by listing (and filtering) every registry of ns.
func (c *Reader) registriesOf(ctx context.Context, ns, service, index, key string) ([]*v1beta1.ServiceRegistry, error) {
	what := service
	if ns != "" {
		what = ns + "/" + service
	}
	if c.registries != nil {
		objs, err := c.registries.ByIndex(index, key)
		if err != nil {
			return nil, fmt.Errorf("ServiceRegistries of service %s from the index: %w", what, err)
		}
		out := make([]*v1beta1.ServiceRegistry, 0, len(objs))
		for _, o := range objs {
			if reg, ok := o.(*v1beta1.ServiceRegistry); ok {
				out = append(out, reg)
			}
		}
		return out, nil
	}
	var regs v1beta1.ServiceRegistryList
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if c.index != nil {
		opts = append(opts, client.MatchingFields{registryServiceField: service})
	}
	if err := c.client.List(ctx, &regs, opts...); err != nil {
		return nil, fmt.Errorf("list ServiceRegistries of service %s: %w", what, err)
	}
	out := make([]*v1beta1.ServiceRegistry, 0, len(regs.Items))
	for i := range regs.Items {
		if regs.Items[i].ResolvedServiceName() == service {
			out = append(out, &regs.Items[i])
		}
	}
	return out, nil
}
