package docgen

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFlagsOf(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("b", true, "a switch")
	fs.Duration("d", 2*time.Second, "how long")
	fs.String("s", "", "the `path` to read")
	got := FlagsOf(fs)
	want := []Flag{
		{Name: "b", Type: "bool", Default: "true", Usage: "a switch"},
		{Name: "d", Type: "duration", Default: "2s", Usage: "how long"},
		{Name: "s", Type: "path", Default: "", Usage: "the path to read"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("flag %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestConstants(t *testing.T) {
	src := `package p

// Group comment for
// the block.
const (
	// AnnoA is set on pods.
	AnnoA = "x/a"
	AnnoB = "x/b" // on Deployments | with a pipe
	AnnoC = "x/c"
	Other = "x/other"
	AnnoN = 3
)

// AnnoD, on registries, says d.
const AnnoD = "x/d"
`
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Constants(path, "Anno")
	if err != nil {
		t.Fatal(err)
	}
	want := []Constant{
		{Name: "AnnoA", Value: "x/a", Doc: "Set on pods."},
		{Name: "AnnoB", Value: "x/b", Doc: `On Deployments \| with a pipe`},
		{Name: "AnnoC", Value: "x/c", Doc: "AnnoA is set on pods."}, // the last doc above it in the group
		{Name: "AnnoD", Value: "x/d", Doc: "On registries, says d."},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("constant %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRenderCRD(t *testing.T) {
	crd, err := ReadCRD("../../config/crd/bases/discovery.registrar.dev_serviceregistries.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := Render(Input{CRD: crd})
	for _, want := range []string{
		"| `spec.warmup.onFailure` | string | `\"Block\"` | one of Block, Proceed |",
		"| `spec.ports[].name` | string | — | required; length ≥ 1; length ≤ 63;",
		"- `spec.ports[]`: exactly one of port or targetPort must be set",
		"| `status.endpoints[].state` |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("reference lacks %q", want)
		}
	}
	if strings.Contains(out, "spec.selector.matchLabels") || strings.Contains(out, "status.conditions[]") {
		t.Error("standard Kubernetes types are expanded")
	}
}

func TestReadVocabulary(t *testing.T) {
	src := `package p

const (
	// CondA reports a.
	//
	//   - True (Good): fine.
	//   - False (Bad): not.
	//   - Unknown: not used.
	ConditionA = "A"

	// ReasonGood: all is well.
	// Used by: A.
	ReasonGood = "Good"
	// ReasonBad: it is not.
	// Used by: A, status.endpoints, Deregistered Event.
	ReasonBad = "Bad"
	// GateBad: False.
	GateBad = ReasonBad
	// EventBad (Warning): bad.
	EventBad = "BadThing"
)
`
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := ReadVocabulary(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Conditions) != 1 || v.Conditions[0].Type != "A" || !strings.Contains(v.Conditions[0].Doc, "- True (Good): fine.") {
		t.Errorf("conditions = %+v", v.Conditions)
	}
	if len(v.Reasons) != 2 || v.Reasons[0].Value != "Bad" || strings.Join(v.Reasons[0].UsedBy, "|") != "A|status.endpoints|Deregistered Event" ||
		v.Reasons[0].Doc != "It is not." {
		t.Errorf("reasons = %+v", v.Reasons)
	}
	if len(v.Gate) != 1 || v.Gate[0].Value != "Bad" {
		t.Errorf("gate = %+v", v.Gate)
	}
	if len(v.Events) != 1 || v.Events[0].Value != "BadThing" {
		t.Errorf("events = %+v", v.Events)
	}

	bad := strings.Replace(src, "// Used by: A.", "// Used by: Nope.", 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadVocabulary(path); err == nil {
		t.Error("a reason used by an unknown condition was accepted")
	}
	bad = strings.Replace(src, "//   - Unknown: not used.\n", "", 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadVocabulary(path); err == nil {
		t.Error("a condition that does not say what Unknown means was accepted")
	}
}

func TestMetrics(t *testing.T) {
	src := `package p

import "github.com/prometheus/client_golang/prometheus"

var (
	b = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_b_total", Help: "B."}, []string{"kind"})
	a = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x_a_seconds", Help: "A.", Buckets: []float64{1}})
	c = prometheus.ExponentialBuckets(1, 2, 3)
)
`
	path := filepath.Join(t.TempDir(), "m.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Metrics(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "x_a_seconds" || got[0].Type != "histogram" ||
		got[1].Name != "x_b_total" || got[1].Type != "counter" || len(got[1].Labels) != 1 || got[1].Labels[0] != "kind" {
		t.Errorf("metrics = %+v", got)
	}
}
