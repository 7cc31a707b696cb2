package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/claimindex"
)

func reg(name string, created time.Time, inject bool, sel map[string]string) v1beta1.ServiceRegistry {
	return v1beta1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: v1beta1.ServiceRegistrySpec{
			Selector:  metav1.LabelSelector{MatchLabels: sel},
			Injection: &v1beta1.InjectionSpec{Enabled: ptr.To(inject)},
		},
	}
}

func TestMatchingOldestFirstThenName(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	app := map[string]string{"app": "orders"}
	bad := reg("bad", t0, true, nil)
	bad.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	regs := []v1beta1.ServiceRegistry{
		reg("newest", t0.Add(2*time.Second), true, app),
		reg("b-tie", t0.Add(time.Second), true, app),
		reg("a-tie", t0.Add(time.Second), true, app),
		reg("oldest-disabled", t0, false, app),
		reg("other-labels", t0, true, map[string]string{"app": "billing"}),
		reg("empty-selector", t0, true, nil),
		bad,
	}
	got, skipped := matching(regs, map[string]string{"app": "orders", "tier": "web"})
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	if want := []string{"a-tie", "b-tie", "newest"}; !reflect.DeepEqual(names, want) {
		t.Errorf("matching = %v, want %v", names, want)
	}
	if len(skipped) != 1 || !strings.HasPrefix(skipped[0], "bad:") {
		t.Errorf("skipped = %q", skipped)
	}
}

type failingReader struct {
	client.Reader
	err   error
	panic bool
}

func (f failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	if f.panic {
		panic("boom")
	}
	return f.err
}

func podRequest(t *testing.T, raw []byte) admission.Request {
	t.Helper()
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "u1", Operation: admissionv1.Create, Namespace: "shop",
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object: runtime.RawExtension{Raw: raw},
	}}
}

// The handler never denies: every failure admits the pod unchanged, with a warning.
func TestHandleNeverDenies(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "orders-", Labels: map[string]string{"app": "orders"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "img"}}},
	})
	tests := []struct {
		name   string
		reader client.Reader
		raw    []byte
		warn   string
	}{
		{name: "list fails", reader: failingReader{err: errors.New("cache not started")}, raw: raw, warn: "could not list ServiceRegistries in shop"},
		{name: "undecodable pod", reader: failingReader{}, raw: []byte("{not json"), warn: "could not decode"},
		{name: "panic", reader: failingReader{panic: true}, raw: raw, warn: "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &PodInjector{Client: tt.reader, Decoder: admission.NewDecoder(scheme)}
			resp := h.Handle(context.Background(), podRequest(t, tt.raw))
			if !resp.Allowed || len(resp.Patches) != 0 {
				t.Fatalf("allowed=%v patches=%v, want allowed without patches", resp.Allowed, resp.Patches)
			}
			if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tt.warn) {
				t.Errorf("warnings = %q, want one containing %q", resp.Warnings, tt.warn)
			}
		})
	}
}

func TestDescribePod(t *testing.T) {
	for _, tt := range []struct {
		pod  corev1.Pod
		want string
	}{
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orders-1"}}, "pod orders-1"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "orders-"}}, `pod with generateName "orders-" (name not yet assigned at admission)`},
		{corev1.Pod{}, "unnamed pod"},
	} {
		if got := describePod(&tt.pod); got != tt.want {
			t.Errorf("describePod = %q, want %q", got, tt.want)
		}
	}
}

// The first pods of a new annotated Deployment are admitted moments after it is created: the
// webhook's cache may not hold the Deployment yet. The pod must still get the gate and the
// preStop drain (read from the API server), or it starts unwarmed and exits without a drain.
func TestHandleInjectsAPodOfADeploymentTheCacheHasNotSeen(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "orders"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "d-uid", Annotations: map[string]string{
			v1beta1.AnnotationService: "orders", v1beta1.AnnotationPort: "8080", v1beta1.AnnotationDrainSeconds: "7"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "orders-5d4f8b7c9-", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "orders-5d4f8b7c9", UID: "rs-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "img", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
	}
	raw, _ := json.Marshal(pod)
	staleCache := cacheBuilder(scheme).Build() // has not seen the Deployment yet
	apiServer := fake.NewClientBuilder().WithScheme(scheme).WithObjects(d).Build()

	h := &PodInjector{Client: staleCache, APIReader: apiServer, Decoder: admission.NewDecoder(scheme)}
	resp := h.Handle(context.Background(), podRequest(t, raw))
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("allowed=%v patches=%v (%v): the pod of an annotated Deployment the cache has not seen was not injected",
			resp.Allowed, resp.Patches, resp.Result)
	}
	gate := false
	for _, p := range resp.Patches {
		if strings.Contains(fmt.Sprint(p.Value), string(v1beta1.ReadinessGate)) {
			gate = true
		}
	}
	if !gate {
		t.Errorf("no %s readiness gate in the patch %v", v1beta1.ReadinessGate, resp.Patches)
	}

	// A pod whose Deployment the cache holds without annotations costs no API call and is
	// left alone; so is a pod whose Deployment does not exist.
	plain := d.DeepCopy()
	plain.Annotations = nil
	h = &PodInjector{Client: cacheBuilder(scheme).WithObjects(plain).Build(),
		APIReader: failingGetter{t: t}, Decoder: admission.NewDecoder(scheme)}
	if resp := h.Handle(context.Background(), podRequest(t, raw)); len(resp.Patches) != 0 {
		t.Errorf("a pod of a Deployment without annotations was injected: %v", resp.Patches)
	}
	h = &PodInjector{Client: staleCache, APIReader: fake.NewClientBuilder().WithScheme(scheme).Build(), Decoder: admission.NewDecoder(scheme)}
	if resp := h.Handle(context.Background(), podRequest(t, raw)); len(resp.Patches) != 0 {
		t.Errorf("a pod whose Deployment does not exist was injected: %v", resp.Patches)
	}
}

// failingGetter fails the test when the webhook reads from the API server.
type failingGetter struct {
	client.Reader
	t *testing.T
}

func (f failingGetter) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	f.t.Errorf("read %s from the API server although the cache holds it", key)
	return errors.New("unexpected")
}

// cacheBuilder is a fake client with the manager cache's claimant index (internal/claimindex).
func cacheBuilder(scheme *runtime.Scheme) *fake.ClientBuilder {
	return fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&v1beta1.ServiceRegistry{}, claimindex.Field, claimindex.RegistryAnchors).
		WithIndex(&appsv1.Deployment{}, claimindex.Field, claimindex.DeploymentAnchors)
}
