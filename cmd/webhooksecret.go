package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/internal/certs"
)

// selfSignedFromSecret makes the webhook's --webhook-cert-dir hold the self-signed CA and
// serving certificate kept in --webhook-self-signed-secret, generating them into the Secret
// when it is empty or its certificate is no longer usable. Every replica, and the next
// version of the manager during an upgrade, then serves with the same certificate under the
// caBundle already injected: no window in which the API server distrusts a new pod.
func selfSignedFromSecret(cl client.Client, c webhookConfig, hosts []string) (generated bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return ensureWebhookSecret(ctx, cl, podNamespace(), c.selfSignedSecret, c.certDir, hosts)
}

// ensureWebhookSecret writes the certificate of Secret namespace/name into dir, replacing it
// there (certs.Ensure's rules: only what registrar generated) when it is missing or unusable
// for hosts, and stores a replacement back in the Secret. The update is conditional on what
// was read: a replica that loses the race reads the winner's certificate and uses it.
func ensureWebhookSecret(ctx context.Context, cl client.Client, namespace, name, dir string, hosts []string) (generated bool, err error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	for range 10 {
		sec := &corev1.Secret{}
		if err := cl.Get(ctx, key, sec); err != nil {
			return false, fmt.Errorf("webhook certificate: get Secret %s (the install creates it empty): %w", key, err)
		}
		stored := certs.BundleFromData(sec.Data)
		if !stored.Empty() {
			if err := certs.WriteDir(dir, stored); err != nil {
				return false, fmt.Errorf("webhook certificate from Secret %s: %w", key, err)
			}
		}
		generated, err := certs.Ensure(dir, hosts)
		if err != nil {
			return false, fmt.Errorf("webhook certificate from Secret %s: %w", key, err)
		}
		if !generated && !stored.Empty() {
			return false, nil
		}
		b, err := certs.ReadDir(dir)
		if err != nil {
			return false, fmt.Errorf("webhook certificate: %w", err)
		}
		sec.Data = b.Data()
		switch err := cl.Update(ctx, sec); {
		case err == nil:
			setupLog.Info("webhook certificate stored", "secret", key.String(), "hosts", hosts)
			return true, nil
		case apierrors.IsConflict(err):
			continue // another replica stored one first: use it
		default:
			return false, fmt.Errorf("webhook certificate: update Secret %s: %w", key, err)
		}
	}
	return false, fmt.Errorf("webhook certificate: Secret %s still conflicting after 10 attempts", key)
}
