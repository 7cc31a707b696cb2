package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;patch,resourceNames=registrar-mutating-webhook-configuration

// InjectCABundle sets caBundle of every webhook in the MutatingWebhookConfiguration name to
// ca, for installs without cert-manager whose serving certificate the manager generated
// itself. It reads through reader (uncached) and writes only when something differs.
func InjectCABundle(ctx context.Context, reader client.Reader, writer client.Writer, name string, ca []byte) error {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := reader.Get(ctx, types.NamespacedName{Name: name}, cfg); err != nil {
		return fmt.Errorf("get MutatingWebhookConfiguration %s: %w", name, err)
	}
	patch := client.MergeFromWithOptions(cfg.DeepCopy(), client.MergeFromWithOptimisticLock{})
	changed := false
	for i := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, ca) {
			cfg.Webhooks[i].ClientConfig.CABundle = ca
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := writer.Patch(ctx, cfg, patch); err != nil {
		return fmt.Errorf("set caBundle of MutatingWebhookConfiguration %s: %w", name, err)
	}
	return nil
}

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch,resourceNames=serviceregistries.discovery.registrar.dev

// InjectCRDCABundle sets the caBundle of the conversion webhook of the CustomResourceDefinition
// name to ca, as InjectCABundle does for the pod webhook. A CRD without a conversion webhook
// (strategy None) is an error: nothing would call the manager's /convert.
func InjectCRDCABundle(ctx context.Context, reader client.Reader, writer client.Writer, name string, ca []byte) error {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := reader.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		return fmt.Errorf("get CustomResourceDefinition %s: %w", name, err)
	}
	if strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy"); strategy != "Webhook" {
		return fmt.Errorf("CustomResourceDefinition %s has no conversion webhook (strategy %q)", name, strategy)
	}
	path := []string{"spec", "conversion", "webhook", "clientConfig", "caBundle"}
	want := base64.StdEncoding.EncodeToString(ca)
	if have, _, _ := unstructured.NestedString(crd.Object, path...); have == want {
		return nil
	}
	patch := client.MergeFromWithOptions(crd.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if err := unstructured.SetNestedField(crd.Object, want, path...); err != nil {
		return fmt.Errorf("set caBundle of CustomResourceDefinition %s: %w", name, err)
	}
	if err := writer.Patch(ctx, crd, patch); err != nil {
		return fmt.Errorf("set caBundle of CustomResourceDefinition %s: %w", name, err)
	}
	return nil
}
