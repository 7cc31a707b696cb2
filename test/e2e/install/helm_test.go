package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/registrar-dev/registrar/test/support/helmtest"
)

const repo = "../../.."

// TestHelmHarnessMatchesKustomize: the manager `E2E_INSTALL_METHOD=helm make test-e2e`
// installs with helm (charts/registrar with HarnessValues) is the manager the default path
// applies (config/default-selfsigned through adaptManager), so the e2e suite proves the same
// thing either way. Runs without a cluster: helm template and the kustomize library.
func TestHelmHarnessMatchesKustomize(t *testing.T) {
	for name, store := range map[string]string{"host store": "http://10.88.77.1:2379", "bundled store": ""} {
		t.Run(name, func(t *testing.T) { testHelmHarnessMatchesKustomize(t, store) })
	}
}

func testHelmHarnessMatchesKustomize(t *testing.T, store string) {
	cfg := &rest.Config{Host: "https://10.88.77.1:6443"}

	values, err := HarnessValues(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, helmtest.Bin(t), "template", Release, filepath.Join(repo, "charts/registrar"),
		"--namespace", Namespace, "--values", valuesFile)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helm template: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	chart := manager(t, bytes.NewReader(out))

	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(repo, "config/default-selfsigned"))
	if err != nil {
		t.Fatal(err)
	}
	var kust *appsv1.Deployment
	for _, r := range resMap.Resources() {
		if r.GetKind() != "Deployment" || r.GetName() != ManagerName {
			continue
		}
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := utiljson.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		adapted, err := adaptManager(u, cfg, store)
		if err != nil {
			t.Fatal(err)
		}
		kust = toDeployment(t, adapted)
	}
	if kust == nil {
		t.Fatal("config/default-selfsigned has no manager Deployment")
	}

	if got := chart.Spec.Template.Spec.Containers[0].Image; got != "registrar.dev/registrar:local" {
		t.Errorf("chart image %q, want the image make images imports", got)
	}
	same := func(what string, c, k any) {
		t.Helper()
		if !reflect.DeepEqual(c, k) {
			t.Errorf("%s differs (-kustomize +helm):\n%s", what, cmp.Diff(k, c))
		}
	}
	same("replicas", chart.Spec.Replicas, kust.Spec.Replicas)
	same("strategy", chart.Spec.Strategy.Type, kust.Spec.Strategy.Type)
	cs, ks := chart.Spec.Template.Spec, kust.Spec.Template.Spec
	same("hostNetwork", cs.HostNetwork, ks.HostNetwork)
	same("dnsPolicy", cs.DNSPolicy, ks.DNSPolicy)
	cc, kc := cs.Containers[0], ks.Containers[0]
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	same("args (as a set: adaptManager appends the ones it changes)", sorted(cc.Args), sorted(kc.Args))
	same("env", cc.Env, kc.Env)
	same("imagePullPolicy", cc.ImagePullPolicy, kc.ImagePullPolicy)
	same("livenessProbe", cc.LivenessProbe, kc.LivenessProbe)
	same("readinessProbe", cc.ReadinessProbe, kc.ReadinessProbe)
	var cp, kp []string
	for _, p := range cc.Ports {
		cp = append(cp, p.Name+"="+itoa(p.ContainerPort))
	}
	for _, p := range kc.Ports {
		kp = append(kp, p.Name+"="+itoa(p.ContainerPort))
	}
	same("ports", sorted(cp), sorted(kp))
	same("volumeMounts", cc.VolumeMounts, kc.VolumeMounts)
	same("securityContext", cc.SecurityContext, kc.SecurityContext)
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// manager decodes the manager Deployment from a multi-document YAML stream.
func manager(t *testing.T, r io.Reader) *appsv1.Deployment {
	t.Helper()
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			t.Fatal("no manager Deployment rendered")
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Deployment" && u.GetName() == ManagerName {
			return toDeployment(t, u)
		}
	}
}

func toDeployment(t *testing.T, u *unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestHelmRegistrarAgainstAPIServer runs HelmRegistrar, the e2e suite's helm install, against
// envtest's kube-apiserver. Nothing runs pods there, so the test plays kubelet and manager once
// the release exists: it marks the Deployment available and sets the webhook's caBundle, which
// is what HelmRegistrar waits for. The values must pass the chart's schema and the API server.
func TestHelmRegistrarAgainstAPIServer(t *testing.T) {
	env := &envtest.Environment{}
	cfg := helmtest.StartAPIServer(t, env)
	kubeconfig := helmtest.AdminKubeconfig(t, env)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- HelmRegistrar(ctx, c, cfg, Helm{Bin: helmtest.Bin(t), Chart: filepath.Join(repo, "charts/registrar"), Kubeconfig: kubeconfig}, "http://10.88.77.1:2379")
	}()
	// Play kubelet and manager until HelmRegistrar returns.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("HelmRegistrar: %v", err)
			}
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: ManagerName}, d); err != nil {
				t.Fatal(err)
			}
			if !d.Spec.Template.Spec.HostNetwork || d.Spec.Template.Spec.Containers[0].Image != "registrar.dev/registrar:local" ||
				!slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--store-endpoints=http://10.88.77.1:2379") {
				t.Errorf("helm-installed manager not adapted to the harness: %+v", d.Spec.Template.Spec)
			}
			return
		case <-ctx.Done():
			t.Fatal("HelmRegistrar did not return")
		case <-tick.C:
		}
		d := &appsv1.Deployment{}
		if c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: ManagerName}, d) == nil && d.Status.AvailableReplicas == 0 {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
			_ = c.Status().Update(ctx, d)
		}
		w := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if c.Get(ctx, client.ObjectKey{Name: WebhookConfigName}, w) == nil && len(w.Webhooks) > 0 && len(w.Webhooks[0].ClientConfig.CABundle) == 0 {
			w.Webhooks[0].ClientConfig.CABundle = []byte("-----BEGIN CERTIFICATE-----\n")
			_ = c.Update(ctx, w)
		}
	}
}
