package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

const (
	repository  = "https://github.com/registrar-dev/registrar"
	description = `registrar is a third-party registrar: it watches pods and writes the endpoints of ready,
warmed-up, non-terminating pods into an external service registry store (etcd), and deletes
an endpoint on the very watch event that makes its pod ineligible — no heartbeat TTL in
the removal path.

* **Warm-up before ready**: pods carry the ` + "`registrar.dev/ready`" + ` readiness gate, which
  registrar sets True only after synthetic warm-up requests succeeded and the store
  acknowledged the endpoint.
* **Deregister, then drain, then exit**: a terminating pod leaves the store at once while
  an injected preStop sleep keeps it serving until every caller's cache caught up.
* **Crash dropout**: a pod whose containers stop being ready, or whose node's Lease
  expires, leaves the store on that event.

Create a ServiceRegistry per service (or annotate a Deployment with
` + "`registrar.dev/service`" + `), then read ` + "`kubectl get serviceregistries`" + `.

The manager's ` + "`--store-endpoints`" + ` points at ` + "`http://etcd.registrar-system.svc:2379`" + `; edit the
Subscription's config or the CSV's Deployment for your etcd.`
)

// icon is the console's picture of registrar: a pod handing a card to a registry.
const icon = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="12" fill="#326ce5"/>` +
	`<circle cx="20" cy="32" r="10" fill="#fff"/><rect x="34" y="18" width="20" height="28" rx="3" fill="#fff"/>` +
	`<path d="M38 26h12M38 32h12M38 38h8" stroke="#326ce5" stroke-width="3"/></svg>`

// buildCSV assembles the ClusterServiceVersion.
func buildCSV(o options, in *inputs, samples []map[string]any) (*v1alpha1.ClusterServiceVersion, error) {
	v, err := semver.Parse(o.version)
	if err != nil {
		return nil, fmt.Errorf("-version %q: %w", o.version, err)
	}
	examples, err := json.MarshalIndent(samples, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode alm-examples: %w", err)
	}
	dep := withImage(in.deployment, o.image)
	csv := &v1alpha1.ClusterServiceVersion{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ClusterServiceVersionKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s.v%s", o.pkg, o.version), Namespace: "placeholder",
			Annotations: map[string]string{
				"alm-examples":                           string(examples),
				"capabilities":                           "Basic Install",
				"categories":                             "Networking",
				"containerImage":                         o.image,
				"description":                            "Registers ready, warmed-up pods into etcd and deregisters them on the event that makes them ineligible.",
				"repository":                             repository,
				"operators.operatorframework.io/builder": "registrar-bundlegen",
				"operators.operatorframework.io/project_layout": "go.kubebuilder.io/v4",
			},
		},
		Spec: v1alpha1.ClusterServiceVersionSpec{
			DisplayName: "registrar", Description: description, Maturity: "alpha",
			Version:        version.OperatorVersion{Version: v},
			Replaces:       o.replaces,
			MinKubeVersion: o.minKubeVersion,
			Keywords:       []string{"service discovery", "service registry", "etcd", "readiness gate", "deregistration"},
			Maintainers:    []v1alpha1.Maintainer{{Name: "registrar dev", Email: "dev@registrar.dev"}},
			Provider:       v1alpha1.AppLink{Name: "registrar-dev", URL: repository},
			Links:          []v1alpha1.AppLink{{Name: "Source", URL: repository}, {Name: "Documentation", URL: repository + "#readme"}},
			InstallModes:   installModes(),
			Icon:           []v1alpha1.Icon{{Data: base64.StdEncoding.EncodeToString([]byte(icon)), MediaType: "image/svg+xml"}},
			InstallStrategy: v1alpha1.NamedInstallStrategy{
				StrategyName: v1alpha1.InstallStrategyNameDeployment,
				StrategySpec: installStrategy(in, dep),
			},
			CustomResourceDefinitions: v1alpha1.CustomResourceDefinitions{Owned: []v1alpha1.CRDDescription{ownedCRD(in.crd)}},
			WebhookDefinitions:        webhookDefinitions(in, dep),
		},
	}
	return csv, nil
}

// installModes: the operator watches pods, nodes and node Leases cluster-wide (its
// ClusterRole), so it installs for all namespaces only.
func installModes() []v1alpha1.InstallMode {
	return []v1alpha1.InstallMode{
		{Type: v1alpha1.InstallModeTypeOwnNamespace, Supported: false},
		{Type: v1alpha1.InstallModeTypeSingleNamespace, Supported: false},
		{Type: v1alpha1.InstallModeTypeMultiNamespace, Supported: false},
		{Type: v1alpha1.InstallModeTypeAllNamespaces, Supported: true},
	}
}

func withImage(d *appsv1.Deployment, image string) *appsv1.Deployment {
	out := d.DeepCopy()
	for i := range out.Spec.Template.Spec.Containers {
		if out.Spec.Template.Spec.Containers[i].Name == "manager" {
			out.Spec.Template.Spec.Containers[i].Image = image
		}
	}
	return out
}

func installStrategy(in *inputs, dep *appsv1.Deployment) v1alpha1.StrategyDetailsDeployment {
	sa := dep.Spec.Template.Spec.ServiceAccountName
	s := v1alpha1.StrategyDetailsDeployment{
		DeploymentSpecs:    []v1alpha1.StrategyDeploymentSpec{{Name: dep.Name, Label: dep.Labels, Spec: dep.Spec}},
		ClusterPermissions: []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: sa, Rules: in.clusterRole.Rules}},
	}
	if in.role != nil {
		s.Permissions = []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: sa, Rules: in.role.Rules}}
	}
	return s
}

// webhookDefinitions turns the MutatingWebhookConfiguration into OLM webhook definitions:
// OLM creates the Service (port 443 to the manager's webhook-server port) and the
// certificate, and fills in the namespaceSelector from the OperatorGroup.
func webhookDefinitions(in *inputs, dep *appsv1.Deployment) []v1alpha1.WebhookDescription {
	target := intstr.FromInt32(webhookPort(dep))
	var out []v1alpha1.WebhookDescription
	var mutating []admissionregistrationv1.MutatingWebhook
	if in.webhooks != nil {
		mutating = in.webhooks.Webhooks
	}
	for _, w := range mutating {
		out = append(out, v1alpha1.WebhookDescription{
			GenerateName: w.Name, Type: v1alpha1.MutatingAdmissionWebhook, DeploymentName: dep.Name,
			ContainerPort: 443, TargetPort: &target,
			Rules: w.Rules, FailurePolicy: w.FailurePolicy, MatchPolicy: w.MatchPolicy, ObjectSelector: w.ObjectSelector,
			SideEffects: w.SideEffects, TimeoutSeconds: w.TimeoutSeconds, AdmissionReviewVersions: w.AdmissionReviewVersions,
			ReinvocationPolicy: w.ReinvocationPolicy, WebhookPath: webhookPath(w.ClientConfig),
		})
	}
	// The CRD's conversion webhook: OLM points the CRD's spec.conversion at the same Service
	// and injects its CA (conversionCRDs).
	if conv := in.crd.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter &&
		conv.Webhook != nil && conv.Webhook.ClientConfig != nil && conv.Webhook.ClientConfig.Service != nil {
		none := admissionregistrationv1.SideEffectClassNone
		out = append(out, v1alpha1.WebhookDescription{
			GenerateName: "c" + in.crd.Name, Type: v1alpha1.ConversionWebhook, DeploymentName: dep.Name,
			ContainerPort: 443, TargetPort: &target, SideEffects: &none,
			AdmissionReviewVersions: conv.Webhook.ConversionReviewVersions,
			WebhookPath:             conv.Webhook.ClientConfig.Service.Path,
			ConversionCRDs:          []string{in.crd.Name},
		})
	}
	return out
}

func webhookPort(dep *appsv1.Deployment) int32 {
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "webhook-server" {
				return p.ContainerPort
			}
		}
	}
	return 9443 // controller-runtime's default webhook port
}

func webhookPath(cc admissionregistrationv1.WebhookClientConfig) *string {
	if cc.Service == nil {
		return nil
	}
	return cc.Service.Path
}

// marshalClean encodes obj as YAML without status and the null creationTimestamps that
// typed ObjectMeta carries.
func marshalClean(obj any) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	dropNullTimestamps(m)
	return yaml.Marshal(m)
}

func dropNullTimestamps(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if child == nil && strings.EqualFold(k, "creationTimestamp") {
				delete(t, k)
				continue
			}
			dropNullTimestamps(child)
		}
	case []any:
		for _, child := range t {
			dropNullTimestamps(child)
		}
	}
}
