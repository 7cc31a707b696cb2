// Package conversion tests the graduation of ServiceRegistry to v1beta1 against a real
// kube-apiserver and etcd (envtest): objects written while the CRD knew only v1alpha1 are
// read as v1beta1 through the conversion webhook (served by this test process, as the
// manager serves it), migrated to v1beta1 storage the way kube-storage-version-migrator does
// it, and still read back unchanged as v1alpha1.
package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/registrar-dev/registrar/api/v1alpha1"
	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/docgen"
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := proc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	current, err := docgen.ReadCRD(filepath.Join(root, "config", "crd", "bases", crdName+".yaml"))
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
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (KUBEBUILDER_ASSETS: make envtest-assets): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	serveConversion(ctx, t, scheme, &env.WebhookInstallOptions)

	ns := "upgrade"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	written := map[string]*v1alpha1.ServiceRegistry{}
	for _, r := range before(ns) {
		if err := c.Create(ctx, r); err != nil {
			t.Fatalf("create v1alpha1 %s: %v", r.Name, err)
		}
		written[r.Name] = r.DeepCopy() // as the API server returned it: defaults applied
	}
	etcd := etcdClient(t, env)
	checkStored(ctx, t, etcd, ns, "discovery.registrar.dev/v1alpha1", len(written))

	// The upgrade: the CRD of this release (v1alpha1 and v1beta1 served, v1beta1 stored) with
	// its conversion webhook.
	upgradeCRD(ctx, t, c, current, &env.WebhookInstallOptions)
	checkStoredVersions(ctx, t, c, []string{"v1alpha1", "v1beta1"})

	// Every object reads as v1beta1 (converted by the webhook) and, unchanged, as v1alpha1.
	versions := map[string]string{}
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
		versions[name] = got.ResourceVersion
	}
	checkAlpha(ctx, t, c, written, "after the upgrade")
	// Still stored as written: reading converts, it does not write.
	checkStored(ctx, t, etcd, ns, "discovery.registrar.dev/v1alpha1", len(written))

	// Storage migration, as kube-storage-version-migrator does it: read and write back each
	// object (the API server encodes it in the storage version), then drop v1alpha1 from the
	// CRD's status.storedVersions.
	list := &v1beta1.ServiceRegistryList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(written) {
		t.Fatalf("listed %d v1beta1 ServiceRegistries, want %d", len(list.Items), len(written))
	}
	for i := range list.Items {
		if err := c.Update(ctx, &list.Items[i]); err != nil {
			t.Fatalf("migrate %s: %v", list.Items[i].Name, err)
		}
		if list.Items[i].ResourceVersion == versions[list.Items[i].Name] {
			t.Errorf("%s: the write-back did not write (resourceVersion %s unchanged)", list.Items[i].Name, versions[list.Items[i].Name])
		}
	}
	checkStored(ctx, t, etcd, ns, "discovery.registrar.dev/v1beta1", len(written))
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

// serveConversion serves the conversion webhook (controller-runtime's /convert, as the
// manager registers it) on envtest's local webhook address with its certificate.
func serveConversion(ctx context.Context, t *testing.T, scheme *runtime.Scheme, o *envtest.WebhookInstallOptions) {
	t.Helper()
	srv := webhook.NewServer(webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir})
	srv.Register("/convert", conversion.NewWebhookHandler(scheme, conversion.NewRegistry()))
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Start(sctx) }()
	t.Cleanup(func() { stop(); <-done })
	addr := net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort))
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("conversion webhook not listening on %s: %v", addr, err)
	}
}

// upgradeCRD replaces the CRD's versions with those of current and points its conversion
// webhook at the test's server, then waits until v1beta1 is served.
func upgradeCRD(ctx context.Context, t *testing.T, c client.Client, current *apiextensionsv1.CustomResourceDefinition, o *envtest.WebhookInstallOptions) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://%s/convert", net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort)))
	crd.Spec.Versions = current.Spec.Versions
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: o.LocalServingCAData},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if err := c.Update(ctx, crd); err != nil {
		t.Fatalf("upgrade the CRD: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := c.List(ctx, &v1beta1.ServiceRegistryList{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("v1beta1 not served after the CRD upgrade: %v", err)
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

// checkStored asserts that the n ServiceRegistries of ns are stored in etcd (as JSON, where
// the API server keeps custom resources) with the apiVersion want.
func checkStored(ctx context.Context, t *testing.T, etcd *clientv3.Client, ns, want string, n int) {
	t.Helper()
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := etcd.Get(gctx, "/registry/discovery.registrar.dev/serviceregistries/"+ns+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("read etcd: %v", err)
	}
	if len(resp.Kvs) != n {
		t.Fatalf("%d ServiceRegistries stored in etcd under %s, want %d", len(resp.Kvs), ns, n)
	}
	for _, kv := range resp.Kvs {
		var obj struct {
			APIVersion string `json:"apiVersion"`
		}
		if !json.Valid(kv.Value) {
			// Not JSON (CBOR, where the API server is told to store custom resources so):
			// the apiVersion is still one contiguous string.
			if !bytes.Contains(kv.Value, []byte(want)) {
				t.Errorf("%s stored without %s: %q", kv.Key, want, kv.Value)
			}
			continue
		}
		if err := json.Unmarshal(kv.Value, &obj); err != nil {
			t.Fatalf("%s: %v", kv.Key, err)
		}
		if obj.APIVersion != want {
			t.Errorf("%s stored as %s, want %s", kv.Key, obj.APIVersion, want)
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
