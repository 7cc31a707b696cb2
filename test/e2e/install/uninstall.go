package install

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Uninstall removes what Registrar (method "kustomize", the objects of the manifests at
// path) or HelmRegistrar (method "helm": helm uninstall, then the chart's CRD, which Helm
// keeps) installed, so that the next install on the same cluster starts clean: first every
// ServiceRegistry, while the manager still runs to remove its finalizer (its records leave
// the store), then the install's objects, waiting until the manager's namespace and the CRD
// are gone. hack/ci-e2e.sh runs the kustomize subset, then the Helm subset, on one cluster.
func Uninstall(ctx context.Context, c client.Client, method, path string, h Helm) error {
	regs := &v1beta1.ServiceRegistryList{}
	if err := c.List(ctx, regs); err != nil {
		return fmt.Errorf("list ServiceRegistries: %w", err)
	}
	for i := range regs.Items {
		if err := c.Delete(ctx, &regs.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete ServiceRegistry %s/%s: %w", regs.Items[i].Namespace, regs.Items[i].Name, err)
		}
	}
	if err := waitFor(ctx, "every ServiceRegistry deleted (the manager removes its finalizer)", func(ctx context.Context) (bool, error) {
		left := &v1beta1.ServiceRegistryList{}
		err := c.List(ctx, left)
		return err == nil && len(left.Items) == 0, nil
	}); err != nil {
		return err
	}

	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName("serviceregistries." + v1beta1.GroupVersion.Group)
	switch method {
	case "helm":
		if err := helmUninstall(ctx, h); err != nil {
			return err
		}
		// helm uninstall leaves nothing behind: the bundled store's claims go with its
		// StatefulSet (persistentVolumeClaimRetentionPolicy), its PKI Secret with the
		// manager's Deployment (owner reference), both through the garbage collector.
		var left []string
		if err := waitFor(ctx, "nothing of the release left after helm uninstall", func(ctx context.Context) (bool, error) {
			var err error
			left, err = Leftovers(ctx, c)
			return err == nil && len(left) == 0, nil
		}); err != nil {
			return fmt.Errorf("%w: left: %v", err, left)
		}
		if err := c.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete CRD %s: %w", crd.GetName(), err)
		}
		// --create-namespace made the namespace; helm uninstall leaves it.
		ns := &corev1.Namespace{}
		ns.Name = Namespace
		if err := c.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete namespace %s: %w", Namespace, err)
		}
	default:
		objs, err := readManifests(path)
		if err != nil {
			return err
		}
		for _, u := range slices.Backward(objs) {
			if err := c.Delete(ctx, u, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	return waitFor(ctx, "namespace "+Namespace+" and the CRD gone", func(ctx context.Context) (bool, error) {
		nsErr := c.Get(ctx, client.ObjectKey{Name: Namespace}, &corev1.Namespace{})
		crdErr := c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, crd.DeepCopy())
		return apierrors.IsNotFound(nsErr) && apierrors.IsNotFound(crdErr), nil
	})
}

func helmUninstall(ctx context.Context, h Helm) error {
	dir, err := os.MkdirTemp("", "registrar-e2e-helm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := []string{"uninstall", Release, "--namespace", Namespace, "--kubeconfig", h.Kubeconfig, "--wait", "--timeout", "3m"}
	return h.run(ctx, dir, args...)
}

func waitFor(ctx context.Context, what string, done wait.ConditionWithContextFunc) error {
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, done); err != nil {
		return fmt.Errorf("uninstall: waiting for %s: %w", what, err)
	}
	return nil
}

// Leftovers lists what of an install is still there: in its namespace every object of the
// kinds an install makes or causes (pods, claims, Secrets, ConfigMaps but the API server's
// kube-root-ca.crt, Services, workloads, service accounts but "default", RBAC, disruption
// budgets), and the cluster-scoped RBAC and webhook configurations named registrar-*. Not
// counted: the leader election Lease the manager writes and Events, which stay until the
// namespace goes (docs/helm.md).
func Leftovers(ctx context.Context, c client.Client) ([]string, error) {
	var out []string
	ns := client.InNamespace(Namespace)
	lists := []struct {
		kind string
		list client.ObjectList
		skip func(name string) bool
	}{
		{"Pod", &corev1.PodList{}, nil},
		{"PersistentVolumeClaim", &corev1.PersistentVolumeClaimList{}, nil},
		{"Secret", &corev1.SecretList{}, nil},
		{"ConfigMap", &corev1.ConfigMapList{}, func(n string) bool { return n == "kube-root-ca.crt" }},
		{"Service", &corev1.ServiceList{}, nil},
		{"ServiceAccount", &corev1.ServiceAccountList{}, func(n string) bool { return n == "default" }},
		{"Deployment", &appsv1.DeploymentList{}, nil},
		{"StatefulSet", &appsv1.StatefulSetList{}, nil},
		{"ReplicaSet", &appsv1.ReplicaSetList{}, nil},
		{"Role", &rbacv1.RoleList{}, nil},
		{"RoleBinding", &rbacv1.RoleBindingList{}, nil},
		{"PodDisruptionBudget", &policyv1.PodDisruptionBudgetList{}, nil},
	}
	for _, l := range lists {
		if err := c.List(ctx, l.list, ns); err != nil {
			return nil, fmt.Errorf("list %s: %w", l.kind, err)
		}
		items, err := meta.ExtractList(l.list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			o := it.(client.Object)
			if l.skip == nil || !l.skip(o.GetName()) {
				out = append(out, l.kind+" "+Namespace+"/"+o.GetName())
			}
		}
	}
	cluster := []struct {
		kind string
		list client.ObjectList
	}{
		{"ClusterRole", &rbacv1.ClusterRoleList{}},
		{"ClusterRoleBinding", &rbacv1.ClusterRoleBindingList{}},
		{"MutatingWebhookConfiguration", &admissionregistrationv1.MutatingWebhookConfigurationList{}},
	}
	for _, l := range cluster {
		if err := c.List(ctx, l.list); err != nil {
			return nil, fmt.Errorf("list %s: %w", l.kind, err)
		}
		items, err := meta.ExtractList(l.list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if o := it.(client.Object); strings.HasPrefix(o.GetName(), "registrar-") {
				out = append(out, l.kind+" "+o.GetName())
			}
		}
	}
	return out, nil
}
