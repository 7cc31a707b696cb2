// Package claimindex finds, without reading a whole namespace, the claimants that may select
// a pod (internal/eligibility): the ServiceRegistries whose selector may select it, and the
// annotated Deployments whose ServiceRegistry the operator is about to create (the webhook
// gates their pods already).
//
// Each such object is indexed in the manager's cache under one anchor: a label pair of its
// selector's matchLabels (every pod it selects carries that pair), or "*" when its selector
// is made of matchExpressions only. A pod's candidates are the objects anchored under one of
// its own labels plus the "*" ones, so the work for one pod is its labels and the objects
// that may select it, not the namespace (issue 16: the gate releaser and the webhook read
// every registry and Deployment of the namespace per pod before). Candidates are a superset
// of the claimants that select the pod: callers still match each selector.
package claimindex

import (
	"context"
	"fmt"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/annotations"
	"github.com/registrar-dev/registrar/internal/eligibility"
)

// Field is the name of the index on ServiceRegistries and Deployments.
const Field = "registrar.dev/selector-anchor"

// unanchored is the anchor of a selector without matchLabels; it is no label pair (those
// always hold "=").
const unanchored = "*"

// Anchor is the index value of a selector: "key=value" of its matchLabels entry with the
// smallest key, "*" when it has matchExpressions only, and "" for an empty selector (it
// selects nothing and is not indexed).
func Anchor(ls *metav1.LabelSelector) string {
	if len(ls.MatchLabels) > 0 {
		keys := make([]string, 0, len(ls.MatchLabels))
		for k := range ls.MatchLabels {
			keys = append(keys, k)
		}
		k := slices.Min(keys)
		return k + "=" + ls.MatchLabels[k]
	}
	if len(ls.MatchExpressions) > 0 {
		return unanchored
	}
	return ""
}

func indexed(anchor string) []string {
	if anchor == "" {
		return nil
	}
	return []string{anchor}
}

// RegistryAnchors indexes a ServiceRegistry by its selector's anchor.
func RegistryAnchors(o client.Object) []string {
	reg, ok := o.(*v1beta1.ServiceRegistry)
	if !ok {
		return nil
	}
	return indexed(Anchor(&reg.Spec.Selector))
}

// DeploymentAnchors indexes a Deployment annotated for registration (and usable) by the
// anchor of the selector its ServiceRegistry will have; other Deployments are not indexed.
func DeploymentAnchors(o client.Object) []string {
	d, ok := o.(*appsv1.Deployment)
	if !ok {
		return nil
	}
	res := annotations.Spec(d)
	if !res.Enabled || !res.Usable {
		return nil
	}
	return indexed(Anchor(&res.Spec.Selector))
}

// registered remembers the field indexers the index was added to: the controller and the
// webhook both need it, on one manager.
var registered sync.Map

// Register adds the index to the cache's ServiceRegistries and Deployments, once per
// indexer (later calls are no-ops). Call it before the cache starts.
func Register(ctx context.Context, fi client.FieldIndexer) error {
	if _, done := registered.LoadOrStore(fi, struct{}{}); done {
		return nil
	}
	if err := fi.IndexField(ctx, &v1beta1.ServiceRegistry{}, Field, RegistryAnchors); err != nil {
		registered.Delete(fi)
		return fmt.Errorf("index ServiceRegistries by selector anchor: %w", err)
	}
	if err := fi.IndexField(ctx, &appsv1.Deployment{}, Field, DeploymentAnchors); err != nil {
		return fmt.Errorf("index annotated Deployments by selector anchor: %w", err)
	}
	return nil
}

// lookups are the anchors a pod with these labels may be selected under.
func lookups(podLabels map[string]string) []string {
	out := make([]string, 0, len(podLabels)+1)
	for k, v := range podLabels {
		out = append(out, k+"="+v)
	}
	return append(out, unanchored)
}

// Candidates returns the ServiceRegistries and the annotated Deployments of namespace ns
// that may select a pod with these labels (see the package comment), each once, in no
// particular order. They are the cache's objects, not copies: read them, never modify them.
func Candidates(ctx context.Context, c client.Reader, ns string, podLabels map[string]string) ([]v1beta1.ServiceRegistry, []appsv1.Deployment, error) {
	var regs []v1beta1.ServiceRegistry
	var deps []appsv1.Deployment
	for _, a := range lookups(podLabels) {
		// Each object has one anchor, so the lists never overlap.
		var rl v1beta1.ServiceRegistryList
		if err := c.List(ctx, &rl, client.InNamespace(ns), client.MatchingFields{Field: a}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, fmt.Errorf("list ServiceRegistries of %s anchored under %q: %w", ns, a, err)
		}
		regs = append(regs, rl.Items...)
		var dl appsv1.DeploymentList
		if err := c.List(ctx, &dl, client.InNamespace(ns), client.MatchingFields{Field: a}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, fmt.Errorf("list Deployments of %s anchored under %q: %w", ns, a, err)
		}
		deps = append(deps, dl.Items...)
	}
	return regs, deps, nil
}

// Registries returns the ServiceRegistries of namespace ns that may select a pod with these
// labels, plus, for each annotated Deployment among the candidates whose ServiceRegistry does
// not exist yet, the registry its annotations describe (RegistryOf): the pods of a Deployment
// created together with its annotations are admitted, and gated, before the operator has
// created that registry. The registries listed are the cache's: read them, never modify
// them. When only a check of an annotated Deployment's registry fails, the registries found
// so far come back with the error.
func Registries(ctx context.Context, c client.Reader, ns string, podLabels map[string]string) ([]v1beta1.ServiceRegistry, error) {
	regs, deployments, err := Candidates(ctx, c, ns, podLabels)
	if err != nil {
		return nil, err
	}
	candidate := make(map[string]bool, len(regs))
	for i := range regs {
		candidate[regs[i].Name] = true
	}
	for i := range deployments {
		d := &deployments[i]
		if candidate[d.Name] {
			continue
		}
		exists, err := RegistryExists(ctx, c, ns, d.Name)
		if err != nil {
			return regs, err
		}
		if res := annotations.Spec(d); !exists && res.Enabled && res.Usable {
			regs = append(regs, RegistryOf(d))
		}
	}
	return regs, nil
}

// RegistryExists tells whether c holds a ServiceRegistry of that name, whatever it selects.
func RegistryExists(ctx context.Context, c client.Reader, ns, name string) (bool, error) {
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1beta1.ServiceRegistry{}, client.UnsafeDisableDeepCopy)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get ServiceRegistry %s/%s: %w", ns, name, err)
	}
	return true, nil
}

// RegistryOf is the ServiceRegistry an annotated Deployment describes, as the operator will
// create it.
func RegistryOf(d *appsv1.Deployment) v1beta1.ServiceRegistry {
	return v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name, CreationTimestamp: d.CreationTimestamp},
		Spec:       annotations.Defaulted(annotations.Spec(d).Spec),
	}
}

// Claimants describes the claimants that may select a pod with these labels in namespace
// ns (Registries: the registries anchored under one of the labels, and
// the registry each such annotated Deployment without one is about to get). Not the
// namespace: the work is the pod's labels and the objects that may select it. Callers match
// each selector.
func Claimants(ctx context.Context, c client.Reader, ns string, podLabels map[string]string) ([]eligibility.Claimant, error) {
	regs, err := Registries(ctx, c, ns, podLabels)
	if err != nil {
		return nil, err
	}
	out := make([]eligibility.Claimant, 0, len(regs))
	for i := range regs {
		out = append(out, eligibility.ClaimantOf(&regs[i]))
	}
	return out, nil
}
