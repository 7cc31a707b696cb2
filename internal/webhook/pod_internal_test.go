package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/registrar-dev/registrar/api/v1alpha1"
)

func reg(name string, created time.Time, inject bool, sel map[string]string) v1alpha1.ServiceRegistry {
	return v1alpha1.ServiceRegistry{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: v1alpha1.ServiceRegistrySpec{
			Selector:  metav1.LabelSelector{MatchLabels: sel},
			Injection: &v1alpha1.InjectionSpec{Enabled: inject},
		},
	}
}

func TestMatchingOldestFirstThenName(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	app := map[string]string{"app": "orders"}
	bad := reg("bad", t0, true, nil)
	bad.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	regs := []v1alpha1.ServiceRegistry{
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
