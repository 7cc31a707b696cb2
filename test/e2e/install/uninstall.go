package install

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
