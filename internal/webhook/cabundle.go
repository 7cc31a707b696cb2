package webhook

import (
	"bytes"
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
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
