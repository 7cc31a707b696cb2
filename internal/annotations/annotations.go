// Package annotations turns the registrar.dev/* annotations of a Deployment into the spec of
// the ServiceRegistry that registrar owns for it. It is pure: no client, no I/O.
//
// Bad input never costs a Deployment its registration: a malformed optional annotation is
// reported as a problem and its field is left unset, the rest still applies. Only a value
// the registry cannot exist without (the service name, the selector) makes the result
// unusable, in which case callers must not create or update the registry's spec.
package annotations

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/registrar-dev/registrar/api/v1beta1"
)

// Limits of the values, mirrored from the ServiceRegistry CRD validation.
const (
	MaxPort           = 65535
	MaxWarmupPaths    = 16
	MaxPathLength     = 1024
	MaxWarmupRequests = 10000
	MaxDrainSeconds   = 3600

	// DefaultPortName names the port published for a numeric registrar.dev/port.
	DefaultPortName = "http"

	// maxQuoted bounds how much of a bad value a problem quotes, so that problems stay
	// readable and fit in an Event's note.
	maxQuoted = 64
)

// Result is what a Deployment's annotations ask for.
type Result struct {
	// Enabled is true when the Deployment carries registrar.dev/service: registrar should own
	// a ServiceRegistry for it. When false, every other field is empty.
	Enabled bool
	// Usable is true when Spec can be written: the service name and the selector are valid.
	// An enabled but unusable result must not create or update a registry's spec (a previous,
	// valid spec stays in force); its Problems still need reporting.
	Usable bool
	// Spec is the registry's spec, as written in the annotations (CRD defaults are not
	// filled in: see Defaulted). It is the zero value when Usable is false.
	Spec v1beta1.ServiceRegistrySpec
	// Problems are actionable messages, one per malformed annotation, in a stable order.
	Problems []string
}

// Message is the problems joined by "; ", empty when there are none.
func (r Result) Message() string { return strings.Join(r.Problems, "; ") }

// Spec reads the registrar.dev/* annotations of d. A nil Deployment is not enabled.
func Spec(d *appsv1.Deployment) Result {
	if d == nil {
		return Result{}
	}
	ann := d.Annotations
	service, ok := ann[v1beta1.AnnotationService]
	if !ok {
		return Result{}
	}
	p := &parser{ann: ann}
	res := Result{Enabled: true, Usable: true}

	service = strings.TrimSpace(service)
	if len(validation.IsDNS1123Label(service)) > 0 {
		p.problem(v1beta1.AnnotationService, "%s is not a valid service name (at most 63 lowercase letters, digits and '-', "+
			"starting and ending with a letter or digit); no ServiceRegistry is created or updated until it is fixed", quote(service))
		res.Usable = false
	}
	var selector *metav1.LabelSelector
	if d.Spec.Selector != nil && (len(d.Spec.Selector.MatchLabels) > 0 || len(d.Spec.Selector.MatchExpressions) > 0) {
		if _, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil {
			p.problems = append(p.problems, fmt.Sprintf("the Deployment's spec.selector is invalid (%v); no ServiceRegistry is created or updated until it is fixed", err))
			res.Usable = false
		} else {
			selector = d.Spec.Selector.DeepCopy()
		}
	} else {
		p.problems = append(p.problems, "the Deployment has no spec.selector, and an empty selector would publish every pod of the namespace; no ServiceRegistry is created or updated until it is fixed")
		res.Usable = false
	}

	ports, portSet, portOK := p.ports()
	warmup := p.warmup(portSet, portOK)
	drain := p.drain()

	res.Problems = p.problems
	if res.Usable {
		res.Spec = v1beta1.ServiceRegistrySpec{
			ServiceName: service,
			Selector:    *selector,
			Ports:       ports,
			Warmup:      warmup,
			Drain:       drain,
			// Annotating a Deployment opts its pods into the whole choreography: the webhook
			// gives new pods the readiness gate and the preStop drain.
			Injection: &v1beta1.InjectionSpec{Enabled: ptr.To(true)},
		}
	}
	return res
}

// Defaulted returns a copy of spec with the defaults the ServiceRegistry CRD applies filled
// in, so that a spec read back from the API server compares equal to what was written.
func Defaulted(spec v1beta1.ServiceRegistrySpec) v1beta1.ServiceRegistrySpec {
	out := *spec.DeepCopy()
	if w := out.Warmup; w != nil {
		if w.Requests == 0 {
			w.Requests = 10
		}
		if w.Concurrency == 0 {
			w.Concurrency = 2
		}
		if w.TimeoutMillis == 0 {
			w.TimeoutMillis = v1beta1.DefaultWarmupTimeoutMillis
		}
		if w.RequestTimeoutMillis == 0 {
			w.RequestTimeoutMillis = v1beta1.DefaultWarmupRequestTimeoutMillis
		}
		if w.OnFailure == "" {
			w.OnFailure = v1beta1.WarmupBlock
		}
	}
	if d := out.Drain; d != nil && d.Seconds == nil {
		d.Seconds = ptr.To[int32](v1beta1.DefaultDrainSeconds)
	}
	return out
}

type parser struct {
	ann      map[string]string
	problems []string
}

// problem records a problem about one annotation: "<annotation>: <message>".
func (p *parser) problem(annotation, format string, args ...any) {
	p.problems = append(p.problems, annotation+": "+fmt.Sprintf(format, args...))
}

// get returns the trimmed value of an annotation and whether it is present.
func (p *parser) get(annotation string) (string, bool) {
	v, ok := p.ann[annotation]
	return strings.TrimSpace(v), ok
}

// ports reads registrar.dev/port. set says the annotation is present, ok that it parsed.
func (p *parser) ports() (ports []v1beta1.ServicePort, set, ok bool) {
	v, set := p.get(v1beta1.AnnotationPort)
	if !set {
		return nil, false, false
	}
	if v != "" && strings.Trim(v, "0123456789") == "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPort {
			p.problem(v1beta1.AnnotationPort, "%s is not a port number between 1 and %d", quote(v), MaxPort)
			return nil, true, false
		}
		return []v1beta1.ServicePort{{Name: DefaultPortName, Port: int32(n)}}, true, true
	}
	if len(validation.IsValidPortName(v)) > 0 {
		p.problem(v1beta1.AnnotationPort, "%s is neither a port number between 1 and %d nor a container port name "+
			"(at most 15 lowercase letters, digits and '-', with at least one letter)", quote(v), MaxPort)
		return nil, true, false
	}
	return []v1beta1.ServicePort{{Name: v, TargetPort: v}}, true, true
}

// warmup reads registrar.dev/warmup-paths and registrar.dev/warmup-requests.
func (p *parser) warmup(portSet, portOK bool) *v1beta1.WarmupSpec {
	rawPaths, pathsSet := p.get(v1beta1.AnnotationWarmupPaths)
	rawRequests, requestsSet := p.get(v1beta1.AnnotationWarmupRequests)
	if !pathsSet {
		if requestsSet {
			p.problem(v1beta1.AnnotationWarmupRequests, "is set but %s is not: add the paths to request, or remove %s",
				v1beta1.AnnotationWarmupPaths, v1beta1.AnnotationWarmupRequests)
		}
		return nil
	}
	paths, ok := p.paths(rawPaths)
	if !ok {
		return nil // requests are moot; the paths problem says what to fix
	}
	var requests int32
	if requestsSet {
		n, err := strconv.Atoi(rawRequests)
		if err != nil || n < 1 || n > MaxWarmupRequests {
			p.problem(v1beta1.AnnotationWarmupRequests, "%s is not an integer between 1 and %d", quote(rawRequests), MaxWarmupRequests)
		} else {
			requests = int32(n)
		}
	}
	switch {
	case !portSet:
		p.problem(v1beta1.AnnotationWarmupPaths, "warm-up needs a port to send requests to: add %s; warm-up is not configured",
			v1beta1.AnnotationPort)
		return nil
	case !portOK:
		p.problem(v1beta1.AnnotationWarmupPaths, "warm-up is not configured until %s is fixed", v1beta1.AnnotationPort)
		return nil
	}
	return &v1beta1.WarmupSpec{Paths: paths, Requests: requests}
}

// paths splits a comma-separated list of paths; blanks around entries and empty entries are
// ignored.
func (p *parser) paths(raw string) ([]string, bool) {
	var paths []string
	for _, s := range strings.Split(raw, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		switch {
		case !strings.HasPrefix(s, "/"):
			p.problem(v1beta1.AnnotationWarmupPaths, "%s does not start with \"/\" (expected comma-separated paths, e.g. \"/healthz,/warm\"); warm-up is not configured", quote(s))
			return nil, false
		case len(s) > MaxPathLength:
			p.problem(v1beta1.AnnotationWarmupPaths, "a path of %d bytes is longer than %d; warm-up is not configured", len(s), MaxPathLength)
			return nil, false
		case strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			p.problem(v1beta1.AnnotationWarmupPaths, "%s contains a space or a control character (escape it, e.g. %%20); warm-up is not configured", quote(s))
			return nil, false
		}
		paths = append(paths, s)
	}
	switch {
	case len(paths) == 0:
		p.problem(v1beta1.AnnotationWarmupPaths, "%s lists no path (expected comma-separated paths, e.g. \"/healthz,/warm\"); warm-up is not configured", quote(raw))
		return nil, false
	case len(paths) > MaxWarmupPaths:
		p.problem(v1beta1.AnnotationWarmupPaths, "%d paths are listed, at most %d are allowed; warm-up is not configured", len(paths), MaxWarmupPaths)
		return nil, false
	}
	return paths, true
}

// drain reads registrar.dev/drain-seconds.
func (p *parser) drain() *v1beta1.DrainSpec {
	v, set := p.get(v1beta1.AnnotationDrainSeconds)
	if !set {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > MaxDrainSeconds {
		p.problem(v1beta1.AnnotationDrainSeconds, "%s is not an integer between 0 and %d", quote(v), MaxDrainSeconds)
		return nil
	}
	return &v1beta1.DrainSpec{Seconds: ptr.To(int32(n))}
}

// quote quotes a user-supplied value for a message, shortened to maxQuoted runes.
func quote(v string) string {
	if utf8.RuneCountInString(v) > maxQuoted {
		v = string([]rune(v)[:maxQuoted]) + "…"
	}
	return strconv.Quote(v)
}
