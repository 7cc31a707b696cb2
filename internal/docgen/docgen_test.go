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
