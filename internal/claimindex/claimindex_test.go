package claimindex_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/claimindex"
	"github.com/registrar-dev/registrar/internal/selindex"
)

func TestAnchor(t *testing.T) {
	expr := []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}}}
	for _, tt := range []struct {
		name string
		sel  metav1.LabelSelector
		want string
	}{
		{"one label", metav1.LabelSelector{MatchLabels: map[string]string{"app": "orders"}}, "app=orders"},
		{"smallest key", metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web", "app": "orders", "b": "x"}}, "app=orders"},
		{"labels and expressions", metav1.LabelSelector{MatchLabels: map[string]string{"app": "orders"}, MatchExpressions: expr}, "app=orders"},
		{"expressions only", metav1.LabelSelector{MatchExpressions: expr}, "*"},
		{"empty: selects nothing, not indexed", metav1.LabelSelector{}, ""},
		{"prefixed key, empty value", metav1.LabelSelector{MatchLabels: map[string]string{"example.com/app": ""}}, "example.com/app="},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := claimindex.Anchor(&tt.sel); got != tt.want {
				t.Fatalf("Anchor = %q, want %q", got, tt.want)
			}
		})
	}
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func indexed(s *runtime.Scheme, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&v1beta1.ServiceRegistry{}, claimindex.Field, claimindex.RegistryAnchors).
		WithIndex(&appsv1.Deployment{}, claimindex.Field, claimindex.DeploymentAnchors).Build()
}

// Candidates are every registry and annotated Deployment whose selector selects the pod (no
// claimant is missed), each once, and only those anchored under the pod's labels or
// unanchored: in a namespace of 300 registries over 30 apps, a pod's candidates are its own
// app's, not the namespace's.
func TestCandidatesHoldEveryClaimantAndNoMore(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	var objs []client.Object
	var regs []*v1beta1.ServiceRegistry
	var deps []*appsv1.Deployment
	labelsOf := func(i int) map[string]string {
		l := map[string]string{"app": fmt.Sprintf("app-%d", i%30)}
		if rng.IntN(2) == 0 {
			l["tier"] = []string{"web", "db"}[rng.IntN(2)]
		}
		return l
	}
	for i := range 300 {
		sel := metav1.LabelSelector{MatchLabels: labelsOf(i)}
		if i%50 == 0 { // a few selectors of matchExpressions only
			sel = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}
		}
		r := &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("reg-%d", i)}, Spec: v1beta1.ServiceRegistrySpec{Selector: sel}}
		regs = append(regs, r)
		objs = append(objs, r)
	}
	for i := range 60 {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("dep-%d", i)},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labelsOf(i)}}}
		if i%2 == 0 {
			d.Annotations = map[string]string{v1beta1.AnnotationService: fmt.Sprintf("svc-%d", i)}
		}
		deps = append(deps, d)
		objs = append(objs, d)
	}
	// Another namespace with the same labels: never a candidate.
	objs = append(objs, &v1beta1.ServiceRegistry{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "reg-0"},
		Spec: v1beta1.ServiceRegistrySpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "app-0"}}}})
	c := indexed(newScheme(t), objs...)

	for i := range 200 {
		pod := labelsOf(i)
		if i%7 == 0 {
			pod["extra"] = "x"
		}
		gotRegs, gotDeps, err := claimindex.Candidates(context.Background(), c, "shop", pod)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, r := range gotRegs {
			if r.Namespace != "shop" || names[r.Name] {
				t.Fatalf("pod %v: registry %s/%s returned twice or from another namespace", pod, r.Namespace, r.Name)
			}
			names[r.Name] = true
		}
		for _, r := range regs {
			if selindex.Selects(&r.Spec.Selector, pod) && !names[r.Name] {
				t.Fatalf("pod %v: %s selects it but is not a candidate", pod, r.Name)
			}
		}
		if len(gotRegs) > 300/30+300/50+len(pod) {
			t.Fatalf("pod %v: %d candidate registries of 300; want its app's and the unanchored ones", pod, len(gotRegs))
		}
		depNames := map[string]bool{}
		for _, d := range gotDeps {
			if d.Annotations[v1beta1.AnnotationService] == "" || depNames[d.Name] {
				t.Fatalf("pod %v: Deployment %s is not annotated or returned twice", pod, d.Name)
			}
			depNames[d.Name] = true
		}
		for _, d := range deps {
			if d.Annotations != nil && selindex.Selects(d.Spec.Selector, pod) && !depNames[d.Name] {
				t.Fatalf("pod %v: annotated Deployment %s selects it but is not a candidate", pod, d.Name)
			}
		}
	}
}

func TestRegisterOncePerIndexer(t *testing.T) {
	fi := &countingIndexer{}
	for range 3 {
		if err := claimindex.Register(context.Background(), fi); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(fi.fields)
	if want := []string{"Deployment/" + claimindex.Field, "ServiceRegistry/" + claimindex.Field}; !slices.Equal(fi.fields, want) {
		t.Fatalf("indexed %v, want %v", fi.fields, want)
	}
}

type countingIndexer struct{ fields []string }

func (c *countingIndexer) IndexField(_ context.Context, obj client.Object, field string, _ client.IndexerFunc) error {
	kind := "ServiceRegistry"
	if _, ok := obj.(*appsv1.Deployment); ok {
		kind = "Deployment"
	}
	c.fields = append(c.fields, kind+"/"+field)
	return nil
}
