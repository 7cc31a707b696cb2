package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// inputs are the objects of config/manifests the ClusterServiceVersion is made of.
type inputs struct {
	crd         *apiextensionsv1.CustomResourceDefinition
	crdYAML     []byte
	deployment  *appsv1.Deployment
	clusterRole *rbacv1.ClusterRole
	role        *rbacv1.Role
	webhooks    *admissionregistrationv1.MutatingWebhookConfiguration
}

// providedByOLM are kinds in config/manifests that OLM makes itself when it installs the
// ClusterServiceVersion: it creates the namespace (OperatorGroup), the ServiceAccount,
// binds the rules, and creates the webhook Service with its certificate.
var providedByOLM = map[string]bool{
	"Namespace": true, "ServiceAccount": true, "RoleBinding": true, "ClusterRoleBinding": true, "Service": true,
}

// collect renders dir with the kustomize library and sorts its objects into inputs.
func collect(dir string) (*inputs, error) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	in := &inputs{}
	for _, r := range resMap.Resources() {
		if err := in.add(r); err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
		}
	}
	if in.crd == nil || in.deployment == nil || in.clusterRole == nil {
		return nil, fmt.Errorf("kustomize build %s: need a CustomResourceDefinition, a Deployment and a ClusterRole", dir)
	}
	return in, nil
}

func (in *inputs) add(r *resource.Resource) error {
	kind := r.GetKind()
	if providedByOLM[kind] {
		return nil
	}
	m, err := r.Map()
	if err != nil {
		return err
	}
	var target any
	switch kind {
	case "CustomResourceDefinition":
		if in.crd != nil {
			return fmt.Errorf("a second CustomResourceDefinition: teach hack/bundlegen to own several")
		}
		in.crd = &apiextensionsv1.CustomResourceDefinition{}
		target = in.crd
		if in.crdYAML, err = r.AsYAML(); err != nil {
			return err
		}
	case "Deployment":
		in.deployment = &appsv1.Deployment{}
		target = in.deployment
	case "ClusterRole":
		in.clusterRole = &rbacv1.ClusterRole{}
		target = in.clusterRole
	case "Role":
		in.role = &rbacv1.Role{}
		target = in.role
	case "MutatingWebhookConfiguration":
		in.webhooks = &admissionregistrationv1.MutatingWebhookConfiguration{}
		target = in.webhooks
	default:
		return fmt.Errorf("kind %s has no place in the bundle yet: teach hack/bundlegen about it", kind)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, target, true)
}

// readSamples returns the objects of the API group in dir's YAML files, by file name; they
// become the CSV's alm-examples.
func readSamples(dir, group string) ([]map[string]any, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []map[string]any
	for _, p := range paths {
		objs, err := decodeAll(p)
		if err != nil {
			return nil, err
		}
		for _, u := range objs {
			if u.GroupVersionKind().Group == group {
				out = append(out, u.Object)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s objects in %s for alm-examples", group, dir)
	}
	return out, nil
}

func decodeAll(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
