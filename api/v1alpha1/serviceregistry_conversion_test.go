package v1alpha1

import (
	"encoding/json"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// fuzzRounds is the number of random objects per direction and filler.
const fuzzRounds = 3000

// fuzzSeed is FUZZ_SEED, or a fixed seed so that a failure reproduces.
func fuzzSeed(t *testing.T) int64 {
	seed := int64(20261205)
	if s := os.Getenv("FUZZ_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("FUZZ_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (set FUZZ_SEED to change it)", seed)
	return seed
}

// fillers are apimachinery's API fuzzer (meta's fuzzer functions: valid ObjectMeta, no
// TypeMeta) twice: as Kubernetes' round-trip tests use it (half the pointers nil, at most
// one element per slice and map), and with every pointer set and up to three elements.
func fillers(t *testing.T) []*randfill.Filler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	seed := fuzzSeed(t)
	return []*randfill.Filler{
		fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), codecs),
		fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed+1), codecs).NilChance(0).NumElements(1, 3),
	}
}

// TestFuzzSpokeHubSpoke: any v1alpha1 ServiceRegistry converted to v1beta1 and back is the
// same object, whatever its durations (sub-millisecond, negative, beyond int32 units, 0).
func TestFuzzSpokeHubSpoke(t *testing.T) {
	for _, f := range fillers(t) {
		for range fuzzRounds {
			in := &ServiceRegistry{}
			f.Fill(in)
			hub := &v1beta1.ServiceRegistry{}
			if err := in.DeepCopy().ConvertTo(hub); err != nil {
				t.Fatalf("ConvertTo: %v", err)
			}
			out := &ServiceRegistry{}
			if err := out.ConvertFrom(hub); err != nil {
				t.Fatalf("ConvertFrom: %v", err)
			}
			if !apiequality.Semantic.DeepEqual(in, out) {
				t.Fatalf("v1alpha1 -> v1beta1 -> v1alpha1 changed the object (-in +out):\n%s", cmp.Diff(in, out))
			}
		}
	}
}

// TestFuzzHubSpokeHub: any v1beta1 ServiceRegistry converted to v1alpha1 and back is the
// same object.
func TestFuzzHubSpokeHub(t *testing.T) {
	for _, f := range fillers(t) {
		for range fuzzRounds {
			in := &v1beta1.ServiceRegistry{}
			f.Fill(in)
			spoke := &ServiceRegistry{}
			if err := spoke.ConvertFrom(in.DeepCopy()); err != nil {
				t.Fatalf("ConvertFrom: %v", err)
			}
			out := &v1beta1.ServiceRegistry{}
			if err := spoke.ConvertTo(out); err != nil {
				t.Fatalf("ConvertTo: %v", err)
			}
			if !apiequality.Semantic.DeepEqual(in, out) {
				t.Fatalf("v1beta1 -> v1alpha1 -> v1beta1 changed the object (-in +out):\n%s", cmp.Diff(in, out))
			}
		}
	}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// TestConvertDurations pins what each v1alpha1 duration becomes in v1beta1, and when the
// exact value travels in AnnotationDurations.
func TestConvertDurations(t *testing.T) {
	for _, tt := range []struct {
		name       string
		warmup     *WarmupSpec
		window     time.Duration
		want       v1beta1.WarmupSpec
		wantWindow int32
		annotation map[string]int64
	}{
		{
			name:   "whole units",
			warmup: &WarmupSpec{Timeout: dur(30 * time.Second), RequestTimeout: dur(2 * time.Second), MinDuration: dur(300 * time.Millisecond)},
			window: 90 * time.Second,
			want:   v1beta1.WarmupSpec{TimeoutMillis: 30000, RequestTimeoutMillis: 2000, MinDurationMillis: ptr.To[int32](300)},
			// No annotation: every value is exact.
			wantWindow: 90,
		},
		{
			name:   "unset",
			warmup: &WarmupSpec{},
			want:   v1beta1.WarmupSpec{},
		},
		{
			name:       "minDuration 0 stays set",
			warmup:     &WarmupSpec{MinDuration: dur(0)},
			want:       v1beta1.WarmupSpec{MinDurationMillis: ptr.To[int32](0)},
			window:     time.Second,
			wantWindow: 1,
		},
		{
			name:       "finer than the unit",
			warmup:     &WarmupSpec{Timeout: dur(100*time.Millisecond + 500*time.Microsecond), RequestTimeout: dur(10 * time.Millisecond)},
			window:     1500 * time.Millisecond,
			want:       v1beta1.WarmupSpec{TimeoutMillis: 100, RequestTimeoutMillis: 10},
			wantWindow: 1,
			annotation: map[string]int64{"warmup.timeout": int64(100500 * time.Microsecond), "slowStart.window": int64(1500 * time.Millisecond)},
		},
		{
			name:       "a timeout of 0 is not unset",
			warmup:     &WarmupSpec{Timeout: dur(0)},
			want:       v1beta1.WarmupSpec{},
			annotation: map[string]int64{"warmup.timeout": 0},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := &ServiceRegistry{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
				Spec:       ServiceRegistrySpec{Warmup: tt.warmup, SlowStart: &SlowStartSpec{Window: metav1.Duration{Duration: tt.window}}},
			}
			hub := &v1beta1.ServiceRegistry{}
			if err := in.ConvertTo(hub); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *hub.Spec.Warmup); diff != "" {
				t.Errorf("warmup (-want +got):\n%s", diff)
			}
			if hub.Spec.SlowStart.WindowSeconds != tt.wantWindow {
				t.Errorf("windowSeconds = %d, want %d", hub.Spec.SlowStart.WindowSeconds, tt.wantWindow)
			}
			raw, ok := hub.Annotations[AnnotationDurations]
			if ok != (tt.annotation != nil) {
				t.Fatalf("annotations %v, want %s: %v", hub.Annotations, AnnotationDurations, tt.annotation)
			}
			if ok {
				var got map[string]int64
				if err := json.Unmarshal([]byte(raw), &got); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.annotation, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", AnnotationDurations, diff)
				}
			}
			out := &ServiceRegistry{}
			if err := out.ConvertFrom(hub); err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(in, out) {
				t.Errorf("round trip (-in +out):\n%s", cmp.Diff(in, out))
			}
		})
	}
}

// TestChangeThroughHubWins: an entry of AnnotationDurations no longer matching the v1beta1
// field (changed through v1beta1 since) is dropped, and the v1beta1 value is converted.
func TestChangeThroughHubWins(t *testing.T) {
	in := &ServiceRegistry{Spec: ServiceRegistrySpec{Warmup: &WarmupSpec{Timeout: dur(100500 * time.Microsecond)}}}
	hub := &v1beta1.ServiceRegistry{}
	if err := in.ConvertTo(hub); err != nil {
		t.Fatal(err)
	}
	hub.Spec.Warmup.TimeoutMillis = 5000
	out := &ServiceRegistry{}
	if err := out.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	if got := out.Spec.Warmup.Timeout; got == nil || got.Duration != 5*time.Second {
		t.Errorf("timeout = %v, want 5s", got)
	}
	if _, ok := out.Annotations[AnnotationDurations]; ok {
		t.Errorf("v1alpha1 object carries %s: %v", AnnotationDurations, out.Annotations)
	}
}
