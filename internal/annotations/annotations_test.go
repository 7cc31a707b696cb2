package annotations

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

var selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}

// deployment is an annotated Deployment selecting app=web.
func deployment(ann map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: ann},
		Spec:       appsv1.DeploymentSpec{Selector: selector.DeepCopy()},
	}
}

// with returns the service annotation plus kv (alternating keys and values).
func with(kv ...string) map[string]string {
	ann := map[string]string{v1beta1.AnnotationService: "web"}
	for i := 0; i+1 < len(kv); i += 2 {
		ann[kv[i]] = kv[i+1]
	}
	return ann
}

func spec(mutate ...func(*v1beta1.ServiceRegistrySpec)) v1beta1.ServiceRegistrySpec {
	s := v1beta1.ServiceRegistrySpec{ServiceName: "web", Selector: selector, Injection: &v1beta1.InjectionSpec{Enabled: ptr.To(true)}}
	for _, m := range mutate {
		m(&s)
	}
	return s
}

func numeric(n int32) func(*v1beta1.ServiceRegistrySpec) {
	return func(s *v1beta1.ServiceRegistrySpec) {
		s.Ports = []v1beta1.ServicePort{{Name: "http", Port: n}}
	}
}

func named(name string) func(*v1beta1.ServiceRegistrySpec) {
	return func(s *v1beta1.ServiceRegistrySpec) {
		s.Ports = []v1beta1.ServicePort{{Name: name, TargetPort: name}}
	}
}

func warm(requests int32, paths ...string) func(*v1beta1.ServiceRegistrySpec) {
	return func(s *v1beta1.ServiceRegistrySpec) {
		s.Warmup = &v1beta1.WarmupSpec{Paths: paths, Requests: requests}
	}
}

func drain(n int32) func(*v1beta1.ServiceRegistrySpec) {
	return func(s *v1beta1.ServiceRegistrySpec) { s.Drain = &v1beta1.DrainSpec{Seconds: ptr.To(n)} }
}

const (
	svc      = v1beta1.AnnotationService
	port     = v1beta1.AnnotationPort
	paths    = v1beta1.AnnotationWarmupPaths
	requests = v1beta1.AnnotationWarmupRequests
	drainAnn = v1beta1.AnnotationDrainSeconds
)

func TestSpec(t *testing.T) {
	manyPaths := strings.TrimSuffix(strings.Repeat("/p,", 17), ",")
	tests := []struct {
		name string
		ann  map[string]string
		want v1beta1.ServiceRegistrySpec
		// problems are substrings expected in Problems, in order; none means no problem.
		problems []string
	}{
		{name: "service only", ann: with(), want: spec()},
		{name: "service with blanks around it", ann: map[string]string{svc: " web "}, want: spec()},
		{name: "every annotation", ann: with(port, "8080", paths, "/healthz,/warm", requests, "50", drainAnn, "30"),
			want: spec(numeric(8080), warm(50, "/healthz", "/warm"), drain(30))},
		{name: "other annotations are ignored", ann: with("registrar.dev/unknown", "x", "kubectl.kubernetes.io/last-applied-configuration", "{}"), want: spec()},

		// port
		{name: "numeric port", ann: with(port, "8080"), want: spec(numeric(8080))},
		{name: "lowest port", ann: with(port, "1"), want: spec(numeric(1))},
		{name: "highest port", ann: with(port, "65535"), want: spec(numeric(65535))},
		{name: "named port", ann: with(port, "web"), want: spec(named("web"))},
		{name: "named port of 15 characters", ann: with(port, "abcdefghijklmno"), want: spec(named("abcdefghijklmno"))},
		{name: "port 0", ann: with(port, "0"), want: spec(),
			problems: []string{`registrar.dev/port: "0" is not a port number between 1 and 65535`}},
		{name: "port above range", ann: with(port, "65536"), want: spec(),
			problems: []string{`registrar.dev/port: "65536" is not a port number between 1 and 65535`}},
		{name: "port overflowing int", ann: with(port, "99999999999999999999999"), want: spec(),
			problems: []string{`registrar.dev/port: "99999999999999999999999" is not a port number`}},
		{name: "negative port", ann: with(port, "-1"), want: spec(),
			problems: []string{`registrar.dev/port: "-1" is neither a port number between 1 and 65535 nor a container port name`}},
		{name: "port name too long", ann: with(port, "abcdefghijklmnop"), want: spec(),
			problems: []string{`registrar.dev/port: "abcdefghijklmnop" is neither`}},
		{name: "port name in capitals", ann: with(port, "HTTP"), want: spec(),
			problems: []string{`registrar.dev/port: "HTTP" is neither`}},
		{name: "empty port", ann: with(port, ""), want: spec(),
			problems: []string{`registrar.dev/port: "" is neither`}},

		// warm-up
		{name: "paths with blanks and empty entries", ann: with(port, "8080", paths, " /a , /b/c ,, "),
			want: spec(numeric(8080), warm(0, "/a", "/b/c"))},
		{name: "paths with a named port", ann: with(port, "web", paths, "/a"), want: spec(named("web"), warm(0, "/a"))},
		{name: "16 paths", ann: with(port, "8080", paths, strings.TrimSuffix(strings.Repeat("/p,", 16), ",")),
			want: spec(numeric(8080), warm(0, strings.Split(strings.TrimSuffix(strings.Repeat("/p,", 16), ","), ",")...))},
		{name: "17 paths", ann: with(port, "8080", paths, manyPaths), want: spec(numeric(8080)),
			problems: []string{`registrar.dev/warmup-paths: 17 paths are listed, at most 16 are allowed; warm-up is not configured`}},
		{name: "path without a slash", ann: with(port, "8080", paths, "/a,healthz", requests, "5"), want: spec(numeric(8080)),
			problems: []string{`registrar.dev/warmup-paths: "healthz" does not start with "/"`}},
		{name: "path with a space inside", ann: with(port, "8080", paths, "/a b"), want: spec(numeric(8080)),
			problems: []string{`registrar.dev/warmup-paths: "/a b" contains a space`}},
		{name: "path too long", ann: with(port, "8080", paths, "/"+strings.Repeat("x", 1024)), want: spec(numeric(8080)),
			problems: []string{`registrar.dev/warmup-paths: a path of 1025 bytes is longer than 1024`}},
		{name: "no path listed", ann: with(port, "8080", paths, " , "), want: spec(numeric(8080)),
			problems: []string{`registrar.dev/warmup-paths: "," lists no path`}},
		{name: "paths without a port", ann: with(paths, "/a", requests, "5"), want: spec(),
			problems: []string{`registrar.dev/warmup-paths: warm-up needs a port to send requests to: add registrar.dev/port`}},
		{name: "paths with a bad port", ann: with(port, "0", paths, "/a"), want: spec(),
			problems: []string{`registrar.dev/port: "0"`, `registrar.dev/warmup-paths: warm-up is not configured until registrar.dev/port is fixed`}},
		{name: "requests", ann: with(port, "8080", paths, "/a", requests, " 10000 "), want: spec(numeric(8080), warm(10000, "/a"))},
		{name: "requests 0", ann: with(port, "8080", paths, "/a", requests, "0"), want: spec(numeric(8080), warm(0, "/a")),
			problems: []string{`registrar.dev/warmup-requests: "0" is not an integer between 1 and 10000`}},
		{name: "requests above range", ann: with(port, "8080", paths, "/a", requests, "10001"), want: spec(numeric(8080), warm(0, "/a")),
			problems: []string{`registrar.dev/warmup-requests: "10001" is not an integer between 1 and 10000`}},
		{name: "requests not a number", ann: with(port, "8080", paths, "/a", requests, "many"), want: spec(numeric(8080), warm(0, "/a")),
			problems: []string{`registrar.dev/warmup-requests: "many" is not an integer`}},
		{name: "requests without paths", ann: with(port, "8080", requests, "5"), want: spec(numeric(8080)),
			problems: []string{`registrar.dev/warmup-requests: is set but registrar.dev/warmup-paths is not`}},

		// drain
		{name: "drain", ann: with(drainAnn, "15"), want: spec(drain(15))},
		{name: "drain at most", ann: with(drainAnn, "3600"), want: spec(drain(3600))},
		{name: "drain not a number", ann: with(drainAnn, "abc"), want: spec(),
			problems: []string{`registrar.dev/drain-seconds: "abc" is not an integer between 0 and 3600`}},
		{name: "drain negative", ann: with(drainAnn, "-1"), want: spec(),
			problems: []string{`registrar.dev/drain-seconds: "-1" is not an integer between 0 and 3600`}},
		{name: "drain above range", ann: with(drainAnn, "3601"), want: spec(),
			problems: []string{`registrar.dev/drain-seconds: "3601" is not an integer between 0 and 3600`}},
		{name: "drain with a unit", ann: with(drainAnn, "30s"), want: spec(),
			problems: []string{`registrar.dev/drain-seconds: "30s" is not an integer`}},
		{name: "drain 0", ann: with(drainAnn, "0"), want: spec(drain(0))},
		// Hostile values: each is reported, and the rest of the spec still applies.
		{name: "drain in hex", ann: with(drainAnn, "0x10"), want: spec(),
			problems: []string{`registrar.dev/drain-seconds: "0x10" is not an integer`}},
		{name: "drain in exponent notation", ann: with(drainAnn, "1e3"), want: spec(),
			problems: []string{`registrar.dev/drain-seconds: "1e3" is not an integer`}},
		{name: "drain overflowing int64", ann: with(drainAnn, "99999999999999999999"), want: spec(),
			problems: []string{`registrar.dev/drain-seconds: "99999999999999999999" is not an integer`}},
		{name: "port in Arabic-Indic digits", ann: with(port, "٨٠٨٠"), want: spec(),
			problems: []string{`registrar.dev/port:`}},
		{name: "two ports", ann: with(port, "8080,9090"), want: spec(),
			problems: []string{`registrar.dev/port: "8080,9090"`}},
		{name: "requests in exponent notation", ann: with(port, "8080", paths, "/a", requests, "1e9"), want: spec(numeric(8080), warm(0, "/a")),
			problems: []string{`registrar.dev/warmup-requests: "1e9" is not an integer`}},
		{name: "path with CRLF header injection", ann: with(port, "8080", paths, "/a\r\nHost: evil"), want: spec(numeric(8080)),
			problems: []string{`registrar.dev/warmup-paths: "/a\r\nHost: evil" contains a space or a control character`}},
		{name: "path with a NUL", ann: with(port, "8080", paths, "/a\x00b"), want: spec(numeric(8080)),
			problems: []string{`contains a space or a control character`}},
		{name: "path with a tab", ann: with(port, "8080", paths, "/a\tb"), want: spec(numeric(8080)),
			problems: []string{`contains a space or a control character`}},

		// several problems at once: every valid part still applies
		{name: "bad parts do not cost the good ones", ann: with(port, "8080", paths, "/a", requests, "x", drainAnn, "abc"),
			want:     spec(numeric(8080), warm(0, "/a")),
			problems: []string{`registrar.dev/warmup-requests: "x"`, `registrar.dev/drain-seconds: "abc"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Spec(deployment(tt.ann))
			if !got.Enabled || !got.Usable {
				t.Fatalf("Enabled=%v Usable=%v, want both true (problems %q)", got.Enabled, got.Usable, got.Problems)
			}
			if !reflect.DeepEqual(got.Spec, tt.want) {
				t.Errorf("Spec:\n got %+v\nwant %+v", got.Spec, tt.want)
			}
			checkProblems(t, got, tt.problems)
		})
	}
}

func TestSpecUnusable(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name     string
		d        *appsv1.Deployment
		problems []string
	}{
		{name: "service name in capitals", d: deployment(with(svc, "Web", drainAnn, "abc")),
			problems: []string{`registrar.dev/service: "Web" is not a valid service name`, `registrar.dev/drain-seconds: "abc"`}},
		{name: "service name with a dot", d: deployment(with(svc, "web.shop")),
			problems: []string{`registrar.dev/service: "web.shop" is not a valid service name`}},
		{name: "service name too long", d: deployment(with(svc, long)),
			problems: []string{`registrar.dev/service: "` + long + `" is not a valid service name`}},
		{name: "empty service name", d: deployment(with(svc, "")),
			problems: []string{`registrar.dev/service: "" is not a valid service name`}},
		{name: "no selector", d: func() *appsv1.Deployment { d := deployment(with()); d.Spec.Selector = nil; return d }(),
			problems: []string{`the Deployment has no spec.selector`}},
		{name: "empty selector", d: func() *appsv1.Deployment {
			d := deployment(with())
			d.Spec.Selector = &metav1.LabelSelector{}
			return d
		}(), problems: []string{`the Deployment has no spec.selector`}},
		{name: "invalid selector", d: func() *appsv1.Deployment {
			d := deployment(with())
			d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
			return d
		}(), problems: []string{`the Deployment's spec.selector is invalid`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Spec(tt.d)
			if !got.Enabled || got.Usable {
				t.Fatalf("Enabled=%v Usable=%v, want enabled and unusable", got.Enabled, got.Usable)
			}
			if !reflect.DeepEqual(got.Spec, v1beta1.ServiceRegistrySpec{}) {
				t.Errorf("Spec = %+v, want the zero spec", got.Spec)
			}
			checkProblems(t, got, tt.problems)
		})
	}
}

func TestSpecNotEnabled(t *testing.T) {
	for name, d := range map[string]*appsv1.Deployment{
		"nil Deployment":                   nil,
		"no annotations":                   deployment(nil),
		"other registrar annotations only": deployment(map[string]string{port: "8080", drainAnn: "abc"}),
	} {
		t.Run(name, func(t *testing.T) {
			if got := Spec(d); !reflect.DeepEqual(got, Result{}) {
				t.Errorf("Spec = %+v, want the zero Result", got)
			}
		})
	}
}

func TestSpecCopiesSelector(t *testing.T) {
	d := deployment(with())
	got := Spec(d)
	got.Spec.Selector.MatchLabels["app"] = "changed"
	if d.Spec.Selector.MatchLabels["app"] != "web" {
		t.Error("the result shares the Deployment's selector")
	}
}

func TestProblemsQuoteLongValuesShortly(t *testing.T) {
	got := Spec(deployment(with(drainAnn, strings.Repeat("9", 5000)+"\n")))
	checkProblems(t, got, []string{`registrar.dev/drain-seconds: "` + strings.Repeat("9", 64) + `…" is not an integer`})
	if len(got.Message()) > 200 {
		t.Errorf("message of %d bytes, want a short one: %s", len(got.Message()), got.Message())
	}
}

func TestMessage(t *testing.T) {
	if got := (Result{}).Message(); got != "" {
		t.Errorf("Message() = %q, want empty", got)
	}
	if got := (Result{Problems: []string{"a", "b"}}).Message(); got != "a; b" {
		t.Errorf("Message() = %q, want %q", got, "a; b")
	}
}

func TestDefaulted(t *testing.T) {
	in := spec(numeric(8080), warm(0, "/a"), drain(0))
	// drain.seconds 0 is a value (no drain), not a field left for the CRD to default.
	got := Defaulted(in)
	want := spec(numeric(8080), func(s *v1beta1.ServiceRegistrySpec) {
		s.Warmup = &v1beta1.WarmupSpec{Paths: []string{"/a"}, Requests: 10, Concurrency: 2,
			TimeoutMillis: 30000, RequestTimeoutMillis: 2000,
			OnFailure: v1beta1.WarmupBlock}
		s.Drain = &v1beta1.DrainSpec{Seconds: ptr.To[int32](0)}
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Defaulted:\n got %+v\nwant %+v", got, want)
	}
	if in.Warmup.Requests != 0 {
		t.Error("Defaulted changed its argument")
	}
	set := spec(warm(7, "/a"), drain(3))
	set.Warmup.OnFailure = v1beta1.WarmupProceed
	if got := Defaulted(set); got.Warmup.Requests != 7 || *got.Drain.Seconds != 3 || got.Warmup.OnFailure != v1beta1.WarmupProceed {
		t.Errorf("Defaulted overrode set values: %+v %+v", got.Warmup, got.Drain)
	}
	if got := Defaulted(spec()); !reflect.DeepEqual(got, spec()) {
		t.Errorf("Defaulted(no warmup, no drain) = %+v", got)
	}
}

func checkProblems(t *testing.T, got Result, want []string) {
	t.Helper()
	if len(got.Problems) != len(want) {
		t.Fatalf("problems %q, want %d matching %q", got.Problems, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got.Problems[i], w) {
			t.Errorf("problem %d = %q, want it to contain %q", i, got.Problems[i], w)
		}
	}
}
