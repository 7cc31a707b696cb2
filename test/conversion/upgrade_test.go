// Package conversion tests the graduation of ServiceRegistry to v1beta1 against a real
// kube-apiserver and etcd (envtest) and the operator's binary: objects written while the CRD
// knew only v1alpha1 are read as v1beta1 through the conversion webhook the operator serves
// (its self-signed CA injected into the CRD), migrated to v1beta1 storage the way
// kube-storage-version-migrator does it, and still read back unchanged as v1alpha1.
package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/certs"
	"github.com/registrar-dev/registrar/internal/docgen"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/proc"
	"github.com/registrar-dev/registrar/test/support/testenv"
)

const crdName = "serviceregistries.discovery.registrar.dev"

// timeout bounds every wait on the API server.
const timeout = 30 * time.Second

func d(s string) *metav1.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: v}
}

// before are the ServiceRegistries written while the CRD served and stored v1alpha1 only.
func before(ns string) []*v1alpha1.ServiceRegistry {
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	ports := []v1alpha1.ServicePort{{Name: "http", Port: 8080}}
	return []*v1alpha1.ServiceRegistry{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minimal"}, Spec: v1alpha1.ServiceRegistrySpec{Selector: sel}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warm"}, Spec: v1alpha1.ServiceRegistrySpec{
			Selector: sel, Ports: ports,
			Warmup: &v1alpha1.WarmupSpec{Paths: []string{"/warm"}, Timeout: d("45s"), RequestTimeout: d("750ms"), MinDuration: d("1.5s")},
			Drain:  &v1alpha1.DrainSpec{Seconds: ptr.To[int32](0)},
		}},
		// Durations finer than v1beta1's units: kept exactly through the annotation.
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fine", Annotations: map[string]string{"team": "shop"}}, Spec: v1alpha1.ServiceRegistrySpec{
			Selector: sel, Ports: ports,
			Warmup:    &v1alpha1.WarmupSpec{Paths: []string{"/warm"}, Timeout: d("100.5ms"), MinDuration: d("0s")},
			SlowStart: &v1alpha1.SlowStartSpec{Window: metav1.Duration{Duration: 1500 * time.Millisecond}, MinWeightPercent: 20},
		}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ramp"}, Spec: v1alpha1.ServiceRegistrySpec{
			Selector: sel, SlowStart: &v1alpha1.SlowStartSpec{Window: metav1.Duration{Duration: 90 * time.Second}},
		}},
	}
}

// wantBeta is what each object of before reads as in v1beta1 (spec.warmup and
// spec.slowStart, with the CRD's defaults applied) and the annotation it carries.
var wantBeta = map[string]struct {
	warmup     *v1beta1.WarmupSpec
	slowStart  *v1beta1.SlowStartSpec
	annotation string
}{
	"minimal": {},
	"warm": {warmup: &v1beta1.WarmupSpec{Paths: []string{"/warm"}, Requests: 10, Concurrency: 2, OnFailure: v1beta1.WarmupBlock,
		TimeoutMillis: 45000, RequestTimeoutMillis: 750, MinDurationMillis: ptr.To[int32](1500)}},
	"fine": {
		warmup: &v1beta1.WarmupSpec{Paths: []string{"/warm"}, Requests: 10, Concurrency: 2, OnFailure: v1beta1.WarmupBlock,
			TimeoutMillis: 100, RequestTimeoutMillis: 2000, MinDurationMillis: ptr.To[int32](0)},
		slowStart:  &v1beta1.SlowStartSpec{WindowSeconds: 1, MinWeightPercent: 20},
		annotation: `{"slowStart.window":1500000000,"warmup.timeout":100500000}`,
	},
	"ramp": {slowStart: &v1beta1.SlowStartSpec{WindowSeconds: 90, MinWeightPercent: 10}},
}

func TestUpgradeToV1beta1Storage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver, etcd and the operator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, err := proc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	current, err := docgen.ReadCRD(filepath.Join(root, "config", "crd", "bases", "discovery.registrar.dev_serviceregistries.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	old := v1alpha1Only(t, current)

	// The API server with the CRD as it was before v1beta1 (v1alpha1 served and stored).
	scheme, err := testenv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{CRDs: []*apiextensionsv1.CustomResourceDefinition{old}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (KUBEBUILDER_ASSETS: make envtest-assets): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	warnings := &warningRecorder{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	ns := "upgrade"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	written := map[string]*v1alpha1.ServiceRegistry{}
	var names []string
	for _, r := range before(ns) {
		if err := c.Create(ctx, r); err != nil {
			t.Fatalf("create v1alpha1 %s: %v", r.Name, err)
		}
		written[r.Name] = r.DeepCopy() // as the API server returned it: defaults applied
		names = append(names, r.Name)
	}
	etcd := etcdClient(t, env)
	checkStored(ctx, t, etcd, ns, names, "discovery.registrar.dev/v1alpha1")

	// The upgrade, as an install applies it: the CRD of this release (v1alpha1 and v1beta1
	// served, v1beta1 stored) with its conversion webhook but no caBundle, and the operator of
	// this release, which serves /convert and, with --webhook-ca-inject-crd, sets the CRD's
	// caBundle to its self-signed CA.
	webhookPort := freePort(t)
	upgradeCRD(ctx, t, c, current, fmt.Sprintf("https://127.0.0.1:%d/convert", webhookPort))
	certDir := startOperator(t, env, webhookPort)
	checkCAInjected(ctx, t, c, certDir)
	waitServed(ctx, t, c)
	checkStoredVersions(ctx, t, c, []string{"v1alpha1", "v1beta1"})

	// Every object reads as v1beta1 (converted by the operator's webhook) and, unchanged, as
	// v1alpha1.
	for name, want := range wantBeta {
		got := &v1beta1.ServiceRegistry{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
			t.Fatalf("get v1beta1 %s: %v", name, err)
		}
		if !apiequality.Semantic.DeepEqual(got.Spec.Warmup, want.warmup) || !apiequality.Semantic.DeepEqual(got.Spec.SlowStart, want.slowStart) {
			t.Errorf("%s as v1beta1: warmup %+v slowStart %+v, want %+v %+v", name, got.Spec.Warmup, got.Spec.SlowStart, want.warmup, want.slowStart)
		}
		if a := got.Annotations[v1alpha1.AnnotationDurations]; a != want.annotation {
			t.Errorf("%s as v1beta1: %s = %q, want %q", name, v1alpha1.AnnotationDurations, a, want.annotation)
		}
	}
	warnings.reset()
	checkAlpha(ctx, t, c, written, "after the upgrade")
	// v1alpha1 is deprecated: every request to it says so.
	if w := warnings.all(); len(w) != len(written) || !strings.Contains(w[0], "discovery.registrar.dev/v1alpha1 ServiceRegistry is deprecated") {
		t.Errorf("warnings of %d v1alpha1 reads: %q, want one deprecation warning each", len(written), w)
	}

	// A v1alpha1 object written after the upgrade is stored as v1beta1 and reads back as
	// written.
	late := &v1alpha1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}, Spec: v1alpha1.ServiceRegistrySpec{
		Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Ports: []v1alpha1.ServicePort{{Name: "http", Port: 8080}},
		Warmup: &v1alpha1.WarmupSpec{Paths: []string{"/warm"}, Timeout: d("2.0005s"), RequestTimeout: d("250ms")},
	}}
	if err := c.Create(ctx, late); err != nil {
		t.Fatalf("create v1alpha1 %s after the upgrade: %v", late.Name, err)
	}
	checkStored(ctx, t, etcd, ns, []string{late.Name}, "discovery.registrar.dev/v1beta1")
	written[late.Name] = late.DeepCopy()
	names = append(names, late.Name)
	checkAlpha(ctx, t, c, written, "written as v1alpha1 after the upgrade")

	// Storage migration, as kube-storage-version-migrator does it: read and write back each
	// object (the API server encodes it in the storage version; the operator's own status
	// writes may have done so already), then drop v1alpha1 from the CRD's
	// status.storedVersions.
	list := &v1beta1.ServiceRegistryList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(written) {
		t.Fatalf("listed %d v1beta1 ServiceRegistries, want %d", len(list.Items), len(written))
	}
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the operator writes status meanwhile
			r := &v1beta1.ServiceRegistry{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
				return err
			}
			return c.Update(ctx, r)
		})
		if err != nil {
			t.Fatalf("migrate %s: %v", name, err)
		}
	}
	checkStored(ctx, t, etcd, ns, names, "discovery.registrar.dev/v1beta1")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Status.StoredVersions = []string{"v1beta1"}
	if err := c.Status().Update(ctx, crd); err != nil {
		t.Fatalf("drop v1alpha1 from status.storedVersions: %v", err)
	}
	checkStoredVersions(ctx, t, c, []string{"v1beta1"})

	// v1alpha1 is still served: the objects read back as written, through the annotation
	// where v1beta1's integers are coarser.
	checkAlpha(ctx, t, c, written, "after the storage migration")
	// And both versions are documented for kubectl explain (the API server's OpenAPI v3).
	checkExplain(ctx, t, cfgDiscovery(t, env))
}

// startOperator builds the operator and runs it against env with its own etcd store, the
// webhook server on port with a self-signed certificate for 127.0.0.1, and
// --webhook-ca-inject-crd; it returns the certificate directory.
func startOperator(t *testing.T, env *envtest.Environment, port int) string {
	t.Helper()
	dir := t.TempDir()
	store, err := etcdtest.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Stop)
	bin, err := proc.BuildRegistrar(dir)
	if err != nil {
		t.Fatal(err)
	}
	user, err := env.AddUser(envtest.User{Name: "conversion-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	certDir := filepath.Join(dir, "certs")
	p, err := proc.Start(proc.Config{Name: "registrar", Bin: bin, LogPath: filepath.Join(dir, "registrar.log"), Args: []string{
		"--kubeconfig=" + kubeconfig, "--store-endpoints=" + store.Endpoint(), "--store-prefix=/conversion",
		"--leader-elect=false", "--store-fence-name=conversion", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--webhook-port=" + strconv.Itoa(port), "--webhook-cert-dir=" + certDir, "--webhook-self-signed-hosts=127.0.0.1",
		"--webhook-ca-inject-crd=" + crdName,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- end of the operator's log ---\n%s", p.LogTail(40))
		}
	})
	return certDir
}

func freePort(t *testing.T) int {
	t.Helper()
	ps, err := ports.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ps[0]
}

// checkCAInjected waits until the CRD's conversion webhook trusts the operator's
// self-signed CA (what --webhook-ca-inject-crd does).
func checkCAInjected(ctx context.Context, t *testing.T, c client.Client, certDir string) {
	t.Helper()
	var got []byte
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ca, err := os.ReadFile(filepath.Join(certDir, certs.CAFile))
		if err != nil {
			return false, nil // not generated yet
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
			return false, nil
		}
		got = crd.Spec.Conversion.Webhook.ClientConfig.CABundle
		return len(ca) > 0 && bytes.Equal(got, ca), nil
	})
	if err != nil {
		t.Fatalf("the CRD's conversion caBundle is not the operator's CA (%d bytes): %v", len(got), err)
	}
}

// warningRecorder keeps the API server's warnings (the Warning headers of its answers).
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (r *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, text)
}

func (r *warningRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = nil
}

func (r *warningRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.warnings)
}

// v1alpha1Only is the CRD as the release before v1beta1 shipped it: only v1alpha1, stored.
func v1alpha1Only(t *testing.T, current *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	old := current.DeepCopy()
	old.Spec.Conversion = nil
	old.Spec.Versions = slices.DeleteFunc(old.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name != "v1alpha1" })
	if len(old.Spec.Versions) != 1 {
		t.Fatalf("%s has no v1alpha1 version", crdName)
	}
	old.Spec.Versions[0].Storage = true
	old.Spec.Versions[0].Deprecated = false
	old.Spec.Versions[0].DeprecationWarning = nil
	return old
}

// upgradeCRD replaces the CRD's versions with those of current and its conversion with a
// webhook at url, without a caBundle (the operator sets it).
func upgradeCRD(ctx context.Context, t *testing.T, c client.Client, current *apiextensionsv1.CustomResourceDefinition, url string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions = current.Spec.Versions
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if err := c.Update(ctx, crd); err != nil {
		t.Fatalf("upgrade the CRD: %v", err)
	}
}

// waitServed waits until v1beta1 ServiceRegistries can be listed: the API server serves the
// version and converts the stored v1alpha1 objects through the webhook.
func waitServed(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = c.List(ctx, &v1beta1.ServiceRegistryList{})
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("v1beta1 not served after the upgrade: %v (last: %v)", err, last)
	}
}

// checkAlpha reads every object as v1alpha1 and compares it with what was written.
func checkAlpha(ctx context.Context, t *testing.T, c client.Client, written map[string]*v1alpha1.ServiceRegistry, when string) {
	t.Helper()
	for name, w := range written {
		got := &v1alpha1.ServiceRegistry{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
			t.Fatalf("get v1alpha1 %s %s: %v", name, when, err)
		}
		if !apiequality.Semantic.DeepEqual(got.Spec, w.Spec) || !apiequality.Semantic.DeepEqual(got.Annotations, w.Annotations) {
			t.Errorf("%s as v1alpha1 %s differs from what was written (-written +read):\n%s", name, when,
				cmp.Diff(w, got, cmpIgnoreServerFields))
		}
	}
}

var cmpIgnoreServerFields = cmp.FilterPath(func(p cmp.Path) bool {
	s := p.String()
	return s == "ObjectMeta.ResourceVersion" || s == "ObjectMeta.ManagedFields" || s == "ObjectMeta.Generation" || s == "TypeMeta"
}, cmp.Ignore())

// checkStoredVersions waits for the CRD's status.storedVersions to be want.
func checkStoredVersions(ctx context.Context, t *testing.T, c client.Client, want []string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
			return false, nil
		}
		got = crd.Status.StoredVersions
		return slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("status.storedVersions = %v, want %v", got, want)
	}
}

// etcdClient reaches envtest's etcd, to see in which version objects are stored.
func etcdClient(t *testing.T, env *envtest.Environment) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{env.ControlPlane.Etcd.URL.String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// checkStored asserts that the ServiceRegistries names of ns are stored in etcd (as JSON,
// where the API server keeps custom resources) with the apiVersion want.
func checkStored(ctx context.Context, t *testing.T, etcd *clientv3.Client, ns string, names []string, want string) {
	t.Helper()
	for _, name := range names {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		key := "/registry/discovery.registrar.dev/serviceregistries/" + ns + "/" + name
		resp, err := etcd.Get(gctx, key)
		cancel()
		if err != nil {
			t.Fatalf("read etcd: %v", err)
		}
		if len(resp.Kvs) != 1 {
			t.Fatalf("%s not in etcd", key)
		}
		value := resp.Kvs[0].Value
		if !json.Valid(value) {
			// Not JSON (CBOR, where the API server is told to store custom resources so):
			// the apiVersion is still one contiguous string.
			if !bytes.Contains(value, []byte(want)) {
				t.Errorf("%s stored without %s: %q", key, want, value)
			}
			continue
		}
		var obj struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := json.Unmarshal(value, &obj); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if obj.APIVersion != want {
			t.Errorf("%s stored as %s, want %s", key, obj.APIVersion, want)
		}
	}
}

func cfgDiscovery(t *testing.T, env *envtest.Environment) *discovery.DiscoveryClient {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// checkExplain reads the published OpenAPI v3 of both versions (what kubectl explain shows)
// and checks that each documents its warm-up timeout field.
func checkExplain(ctx context.Context, t *testing.T, dc *discovery.DiscoveryClient) {
	t.Helper()
	for version, field := range map[string]string{"v1alpha1": "timeout", "v1beta1": "timeoutMillis"} {
		var desc string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			raw, err := dc.RESTClient().Get().AbsPath("/openapi/v3/apis/discovery.registrar.dev/" + version).DoRaw(ctx)
			if err != nil {
				return false, nil // not published yet
			}
			var doc any
			if err := json.Unmarshal(raw, &doc); err != nil {
				return false, err
			}
			desc = propertyDescription(doc, "warmup", field)
			return desc != "", nil
		})
		if err != nil {
			t.Errorf("OpenAPI v3 of %s: no description of spec.warmup.%s (%v)", version, field, err)
			continue
		}
		t.Logf("kubectl explain serviceregistries.%s.spec.warmup.%s: %s", version, field, desc)
	}
}

// propertyDescription finds, anywhere in an OpenAPI document, the property child of a
// property parent and returns its description.
func propertyDescription(doc any, parent, child string) string {
	switch v := doc.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			if p, ok := props[parent].(map[string]any); ok {
				if pp, ok := p["properties"].(map[string]any); ok {
					if c, ok := pp[child].(map[string]any); ok {
						if s, _ := c["description"].(string); s != "" {
							return s
						}
					}
				}
			}
		}
		for _, e := range v {
			if s := propertyDescription(e, parent, child); s != "" {
				return s
			}
		}
	case []any:
		for _, e := range v {
			if s := propertyDescription(e, parent, child); s != "" {
				return s
			}
		}
	}
	return ""
}
