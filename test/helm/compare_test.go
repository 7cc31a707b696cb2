package helm

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// TestChartMatchesKustomize renders the chart and the kustomize install it stands for and
// compares what decides the installation's behaviour: the same objects (kustomize's
// Namespace aside: helm install --create-namespace makes it), the manager's args, ports,
// probes, security contexts, resources and mounts, RBAC rules and bindings exactly, the
// webhooks (rules, failurePolicy, selectors, timeout, service), the Services' ports and that
// they select the manager's pods, the cert-manager objects and the CRDs.
func TestChartMatchesKustomize(t *testing.T) {
	for _, tt := range []struct {
		overlay string
		values  map[string]string
	}{
		{"default", nil}, // make build-installer
		{"default-selfsigned", map[string]string{"webhook.certificate.mode": "selfSigned", "replicaCount": "1"}}, // make test-e2e
		{"eureka-api", map[string]string{"eurekaApi.enabled": "true"}},                                           // docs/eureka.md
	} {
		t.Run(tt.overlay, func(t *testing.T) {
			chart := renderChart(t, tt.values)
			kust := renderKustomize(t, tt.overlay)
			var kustKeys []string
			for k := range kust {
				if kust[k].GetKind() != "Namespace" {
					kustKeys = append(kustKeys, k)
				}
			}
			slices.Sort(kustKeys)
			if got := sortedKeys(chart); !slices.Equal(got, kustKeys) {
				t.Fatalf("objects differ:\n%s", cmp.Diff(kustKeys, got))
			}
			for _, key := range kustKeys {
				c, k := chart[key], kust[key]
				if k.GetNamespace() != c.GetNamespace() {
					t.Errorf("%s: namespace %q, kustomize %q", key, c.GetNamespace(), k.GetNamespace())
				}
				switch k.GetKind() {
				case "Deployment":
					compareDeployment(t, decode[appsv1.Deployment](t, c), decode[appsv1.Deployment](t, k))
				case "ClusterRole", "Role":
					same(t, key+" rules", c.Object["rules"], k.Object["rules"])
				case "ClusterRoleBinding", "RoleBinding":
					same(t, key+" roleRef", c.Object["roleRef"], k.Object["roleRef"])
					same(t, key+" subjects", c.Object["subjects"], k.Object["subjects"])
				case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
					same(t, key+" webhooks", c.Object["webhooks"], k.Object["webhooks"])
					same(t, key+" cert-manager CA injection", c.GetAnnotations()["cert-manager.io/inject-ca-from"], k.GetAnnotations()["cert-manager.io/inject-ca-from"])
				case "Service":
					selected := chart["Deployment/registrar-controller-manager"]
					switch key {
					case "Service/registrar-eureka-api":
						selected = chart["Deployment/registrar-eureka-api"]
					case "Service/registrar-etcd":
						selected = chart["StatefulSet/registrar-etcd"]
						same(t, key+" clusterIP", c.Object["spec"].(map[string]any)["clusterIP"], k.Object["spec"].(map[string]any)["clusterIP"])
						same(t, key+" publishNotReadyAddresses", c.Object["spec"].(map[string]any)["publishNotReadyAddresses"], k.Object["spec"].(map[string]any)["publishNotReadyAddresses"])
					}
					compareService(t, key, c, k, selected)
				case "StatefulSet":
					compareStatefulSet(t, decode[appsv1.StatefulSet](t, c), decode[appsv1.StatefulSet](t, k))
				case "Secret": // the bundled store's PKI Secret, installed empty
					same(t, key+" type", c.Object["type"], k.Object["type"])
					same(t, key+" data", c.Object["data"], k.Object["data"])
				case "PodDisruptionBudget":
					same(t, key+" maxUnavailable", specWithout(c, "selector"), specWithout(k, "selector"))
				case "CustomResourceDefinition":
					// The chart keeps its CRD on helm uninstall (crds.keep); otherwise the same
					// CRD, conversion webhook and CA injection as kustomize.
					same(t, key+" spec", c.Object["spec"], k.Object["spec"])
					ca := c.GetAnnotations()
					delete(ca, "helm.sh/resource-policy")
					same(t, key+" annotations", ca, k.GetAnnotations())
				case "Certificate":
					cs, ks := specWithout(c, "secretName"), specWithout(k, "secretName")
					same(t, key+" spec (secretName aside)", cs, ks)
				case "Issuer":
					same(t, key+" spec", c.Object["spec"], k.Object["spec"])
				case "ServiceAccount":
				default:
					t.Errorf("%s: no comparison for this kind; add one", key)
				}
			}
		})
	}
}

func compareDeployment(t *testing.T, c, k *appsv1.Deployment) {
	t.Helper()
	same(t, "replicas", c.Spec.Replicas, k.Spec.Replicas)
	cs, ks := c.Spec.Template.Spec, k.Spec.Template.Spec
	same(t, "serviceAccountName", cs.ServiceAccountName, ks.ServiceAccountName)
	same(t, "pod securityContext", cs.SecurityContext, ks.SecurityContext)
	same(t, "terminationGracePeriodSeconds", cs.TerminationGracePeriodSeconds, ks.TerminationGracePeriodSeconds)
	same(t, "hostNetwork", cs.HostNetwork, ks.HostNetwork)
	if len(cs.Containers) != len(ks.Containers) {
		t.Fatalf("containers: %d, kustomize %d", len(cs.Containers), len(ks.Containers))
	}
	cc, kc := cs.Containers[0], ks.Containers[0]
	same(t, "container name", cc.Name, kc.Name)
	same(t, "args", cc.Args, kc.Args)
	same(t, "command", cc.Command, kc.Command)
	same(t, "env", cc.Env, kc.Env)
	same(t, "ports", ports(cc.Ports), ports(kc.Ports))
	same(t, "livenessProbe", cc.LivenessProbe, kc.LivenessProbe)
	same(t, "readinessProbe", cc.ReadinessProbe, kc.ReadinessProbe)
	same(t, "startupProbe", cc.StartupProbe, kc.StartupProbe)
	same(t, "container securityContext", cc.SecurityContext, kc.SecurityContext)
	if !equality.Semantic.DeepEqual(cc.Resources, kc.Resources) {
		t.Errorf("resources: chart %v, kustomize %v", cc.Resources, kc.Resources)
	}
	same(t, "volumeMounts", cc.VolumeMounts, kc.VolumeMounts)
	vols := func(vs []corev1.Volume) map[string]string { // name -> source kind
		out := map[string]string{}
		for _, v := range vs {
			switch {
			case v.EmptyDir != nil:
				out[v.Name] = "emptyDir"
			case v.Secret != nil:
				out[v.Name] = fmt.Sprintf("secret (mode %v)", *v.Secret.DefaultMode)
			default:
				out[v.Name] = "other"
			}
		}
		return out
	}
	same(t, "volumes", vols(cs.Volumes), vols(ks.Volumes))
	sel, err := metav1.LabelSelectorAsSelector(c.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(c.Spec.Template.Labels)) {
		t.Errorf("chart Deployment selector %v does not select its pods %v", c.Spec.Selector, c.Spec.Template.Labels)
	}
}

// ports are the container ports by name (protocol defaulted as the API server does).
func ports(ps []corev1.ContainerPort) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out[p.Name] = fmt.Sprintf("%d/%s", p.ContainerPort, proto)
	}
	return out
}

func compareService(t *testing.T, key string, c, k, deployment *unstructured.Unstructured) {
	t.Helper()
	cs, ks := decode[corev1.Service](t, c), decode[corev1.Service](t, k)
	same(t, key+" ports", cs.Spec.Ports, ks.Spec.Ports)
	same(t, key+" type", cs.Spec.Type, ks.Spec.Type)
	podLabels, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "template", "metadata", "labels")
	if len(cs.Spec.Selector) == 0 || !labels.SelectorFromSet(cs.Spec.Selector).Matches(labels.Set(podLabels)) {
		t.Errorf("%s selector %v does not select the pods of %s: %v", key, cs.Spec.Selector, deployment.GetName(), podLabels)
	}
}

// compareStatefulSet compares the bundled etcd (config/components/etcd, the chart's etcd.*):
// everything but the labels, which carry the chart's instance label.
func compareStatefulSet(t *testing.T, c, k *appsv1.StatefulSet) {
	t.Helper()
	same(t, "etcd replicas", c.Spec.Replicas, k.Spec.Replicas)
	same(t, "etcd serviceName", c.Spec.ServiceName, k.Spec.ServiceName)
	same(t, "etcd podManagementPolicy", c.Spec.PodManagementPolicy, k.Spec.PodManagementPolicy)
	same(t, "etcd updateStrategy", c.Spec.UpdateStrategy, k.Spec.UpdateStrategy)
	same(t, "etcd persistentVolumeClaimRetentionPolicy", c.Spec.PersistentVolumeClaimRetentionPolicy, k.Spec.PersistentVolumeClaimRetentionPolicy)
	same(t, "etcd volumeClaimTemplates", c.Spec.VolumeClaimTemplates, k.Spec.VolumeClaimTemplates)
	cs, ks := c.Spec.Template.Spec, k.Spec.Template.Spec
	same(t, "etcd pod securityContext", cs.SecurityContext, ks.SecurityContext)
	same(t, "etcd automountServiceAccountToken", cs.AutomountServiceAccountToken, ks.AutomountServiceAccountToken)
	same(t, "etcd volumes", cs.Volumes, ks.Volumes)
	if cs.Affinity == nil || cs.Affinity.PodAntiAffinity == nil || len(cs.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("chart etcd: no preferred pod anti-affinity: %+v", cs.Affinity)
	}
	if len(cs.Containers) != 1 || len(ks.Containers) != 1 {
		t.Fatalf("etcd containers: %d, kustomize %d", len(cs.Containers), len(ks.Containers))
	}
	cc, kc := cs.Containers[0], ks.Containers[0]
	same(t, "etcd image", cc.Image, kc.Image)
	same(t, "etcd env", cc.Env, kc.Env)
	same(t, "etcd args", cc.Args, kc.Args)
	same(t, "etcd ports", ports(cc.Ports), ports(kc.Ports))
	same(t, "etcd probes", []any{cc.StartupProbe, cc.LivenessProbe, cc.ReadinessProbe}, []any{kc.StartupProbe, kc.LivenessProbe, kc.ReadinessProbe})
	if !equality.Semantic.DeepEqual(cc.Resources, kc.Resources) {
		t.Errorf("etcd resources: chart %v, kustomize %v", cc.Resources, kc.Resources)
	}
	same(t, "etcd container securityContext", cc.SecurityContext, kc.SecurityContext)
	same(t, "etcd volumeMounts", cc.VolumeMounts, kc.VolumeMounts)
	sel, err := metav1.LabelSelectorAsSelector(c.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(c.Spec.Template.Labels)) {
		t.Errorf("chart StatefulSet selector %v does not select its pods %v", c.Spec.Selector, c.Spec.Template.Labels)
	}
}

func specWithout(u *unstructured.Unstructured, field string) map[string]any {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	delete(spec, field)
	return spec
}

func same(t *testing.T, what string, chart, kustomize any) {
	t.Helper()
	if !reflect.DeepEqual(chart, kustomize) {
		t.Errorf("%s differs (-kustomize +chart):\n%s", what, cmp.Diff(kustomize, chart))
	}
}

func decode[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatalf("decode %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &out
}

func dump(u *unstructured.Unstructured) string {
	if u == nil {
		return "<nil>"
	}
	b, _ := yaml.Marshal(u.Object)
	return string(b)
}
