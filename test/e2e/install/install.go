// Package install puts registrar and the demo app on the single-node cluster of hack/cluster,
// for the end-to-end suite and for `make run`: it applies dist/install.yaml as a user would,
// adapting only what the harness needs (no kube-proxy, so the manager runs on the host
// network and talks to the API server and the store directly).
package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Names in dist/install.yaml (config/default-selfsigned).
const (
	Namespace         = "registrar-system"
	ManagerName       = "registrar-controller-manager"
	WebhookConfigName = "registrar-mutating-webhook-configuration"
	// DemoImage is the demo app's image, imported into containerd by hack/cluster.
	DemoImage = "registrar.dev/demoapp:local"
	// DemoPort is where the demo app serves.
	DemoPort = 8080
)

// Registrar applies the manifests at path (server-side apply) with the manager adapted to
// the harness and pointed at storeEndpoint, then waits until the manager has rolled out and
// its webhook CA is injected.
func Registrar(ctx context.Context, c client.Client, cfg *rest.Config, path, storeEndpoint string) error {
	if err := Apply(ctx, c, cfg, path, storeEndpoint, ""); err != nil {
		return err
	}
	return WaitManager(ctx, c, "")
}

// Apply applies the manifests at path like Registrar (storeEndpoint "" keeps the bundled
// store the manifests point at; image "" keeps the manifests' manager image) without
// waiting: `kubectl apply -k` of a new image is an upgrade.
func Apply(ctx context.Context, c client.Client, cfg *rest.Config, path, storeEndpoint, image string) error {
	objs, err := readManifests(path)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if storeEndpoint != "" && bundledStoreObject(u) {
			continue // a store of its own: the install without config/components/etcd
		}
		if u.GetKind() == "Deployment" && u.GetName() == ManagerName {
			if u, err = adaptManager(u, cfg, storeEndpoint); err != nil {
				return err
			}
			if image != "" {
				if err := setManagerImage(u, image); err != nil {
					return err
				}
			}
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("registrar-install"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// WaitManager waits until the manager has rolled out (running image when it is not "") and
// its webhook CA is injected.
func WaitManager(ctx context.Context, c client.Client, image string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		return managerReady(ctx, c, image), nil
	})
}

func setManagerImage(u *unstructured.Unstructured, image string) error {
	containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		return fmt.Errorf("the manager Deployment has no containers (%v)", err)
	}
	containers[0].(map[string]any)["image"] = image
	return unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
}

func managerReady(ctx context.Context, c client.Client, image string) bool {
	d := &appsv1.Deployment{}
	if c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: ManagerName}, d) != nil || d.Spec.Replicas == nil {
		return false
	}
	if image != "" && d.Spec.Template.Spec.Containers[0].Image != image {
		return false
	}
	want := *d.Spec.Replicas
	if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != want ||
		d.Status.AvailableReplicas != want || d.Status.Replicas != want {
		return false
	}
	w := &admissionregistrationv1.MutatingWebhookConfiguration{}
	return c.Get(ctx, client.ObjectKey{Name: WebhookConfigName}, w) == nil &&
		len(w.Webhooks) > 0 && len(w.Webhooks[0].ClientConfig.CABundle) > 0
}

func readManifests(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s (make build-installer IMG=registrar.dev/registrar:local INSTALL_OVERLAY=config/default-selfsigned): %w", path, err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		objs = append(objs, u)
	}
}

// adaptManager runs the manager on the host network with the locally imported image, the
// API server's address (there is no kube-proxy for the kubernetes Service), ports clear of
// the host's, the given store (none: the bundled one the manifests name, resolved through
// the cluster DNS with dnsPolicy ClusterFirstWithHostNet), and Recreate (a second host-network pod cannot start beside
// the first).
func adaptManager(u *unstructured.Unstructured, cfg *rest.Config, storeEndpoint string) (*unstructured.Unstructured, error) {
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
		return nil, fmt.Errorf("decode the manager Deployment: %w", err)
	}
	api, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	host, port, err := net.SplitHostPort(api.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	spec := &d.Spec.Template.Spec
	spec.HostNetwork = true
	spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	c := &spec.Containers[0]
	c.ImagePullPolicy = corev1.PullNever
	var args []string
	for _, a := range c.Args {
		own := storeEndpoint != "" && (strings.HasPrefix(a, "--store-endpoints=") || strings.HasPrefix(a, "--store-self-signed-"))
		if !own && !strings.HasPrefix(a, "--metrics-bind-address=") && !strings.HasPrefix(a, "--health-probe-bind-address=") {
			args = append(args, a)
		}
	}
	if storeEndpoint != "" {
		args = append(args, "--store-endpoints="+storeEndpoint)
		// What config/components/etcd adds to the manager goes with the bundled store.
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "REGISTRAR_STORE_ENDPOINTS" || e.Name == "POD_NAMESPACE"
		})
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "store-tls" })
		spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "store-tls" })
	}
	c.Args = append(args, "--metrics-bind-address=:18080", "--health-probe-bind-address=:18081", "--zap-log-level=debug")
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: host},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: port})
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p != nil && p.HTTPGet != nil {
			p.HTTPGet.Port = intstr.FromInt32(18081)
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Name == "metrics" {
			c.Ports[i].ContainerPort = 18080
		}
	}
	d.Spec.Replicas = ptr.To[int32](1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return nil, fmt.Errorf("encode the manager Deployment: %w", err)
	}
	out := &unstructured.Unstructured{Object: obj}
	out.SetAPIVersion("apps/v1")
	out.SetKind("Deployment")
	unstructured.RemoveNestedField(out.Object, "status")
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(out.Object, "spec", "template", "metadata", "creationTimestamp")
	return out, nil
}

// RegistrarAnnotations opt a demo Deployment into registrar: service name, port, warm-up on
// /warmup (5 requests) and a 5 s drain.
func RegistrarAnnotations(service string) map[string]string {
	return map[string]string{
		v1beta1.AnnotationService:        service,
		v1beta1.AnnotationPort:           fmt.Sprint(DemoPort),
		v1beta1.AnnotationWarmupPaths:    "/warmup",
		v1beta1.AnnotationWarmupRequests: "5",
		v1beta1.AnnotationDrainSeconds:   "5",
	}
}

// DemoDeployment runs the demo app: readiness probe on /ready, rolling one surge pod at a
// time, and SIGTERM ends it at once (no app-side grace), as many services do.
func DemoDeployment(ns, name string, replicas int32, annotations map[string]string, extraArgs []string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					Containers: []corev1.Container{{
						Name: "app", Image: DemoImage, ImagePullPolicy: corev1.PullNever,
						Args:  append([]string{fmt.Sprintf("--listen=:%d", DemoPort)}, extraArgs...),
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: DemoPort}},
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(DemoPort)}},
							PeriodSeconds: 1, FailureThreshold: 1,
						},
					}},
				},
			},
		},
	}
}

// bundledStoreObject: an object of config/components/etcd (the bundled store and the
// manager's permission to keep its PKI).
func bundledStoreObject(u *unstructured.Unstructured) bool {
	return u.GetLabels()["app.kubernetes.io/name"] == EtcdName ||
		(strings.HasPrefix(u.GetKind(), "Role") && u.GetName() == "registrar-etcd-pki")
}
