package main

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/docgen"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/reference.md (make docs)")

const referenceFile = "../docs/reference.md"

// TestConfigurationReference renders docs/reference.md from the manager's flag set, the
// constants of api/v1beta1 (conditions.go: conditions, reasons, Events), the metrics
// registrations and the CRD, and fails when the committed file differs.
// `make docs` runs it with -update-docs to rewrite the file.
func TestConfigurationReference(t *testing.T) {
	got := renderReference(t)
	if *updateDocs {
		if err := os.WriteFile(referenceFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referenceFile)
	if err != nil || string(want) != got {
		t.Fatalf("docs/reference.md is stale (%v): run `make docs` and commit it", err)
	}
}

func renderReference(t *testing.T) string {
	t.Helper()
	// Defaults must not depend on where the generator runs: drop the environment the
	// flag defaults read (in-cluster detection, REGISTRAR_* settings).
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "REGISTRAR_") || strings.HasPrefix(name, "KUBERNETES_") || strings.HasPrefix(name, "POD_") {
			t.Setenv(name, "")
			if err := os.Unsetenv(name); err != nil {
				t.Fatal(err)
			}
		}
	}
	var c config
	var zopts zap.Options
	gate, err := docgen.Constants("../api/v1beta1/conditions.go", "ReadinessGate")
	if err != nil {
		t.Fatal(err)
	}
	annotations, err := docgen.Constants("../api/v1beta1/serviceregistry_types.go", "Annotation", "Label")
	if err != nil {
		t.Fatal(err)
	}
	vocabulary, err := docgen.ReadVocabulary("../api/v1beta1/conditions.go")
	if err != nil {
		t.Fatal(err)
	}
	// The metrics the manager registers (internal/metrics; the xDS server's in internal/xds and internal/xds/clients).
	metrics, err := docgen.Metrics("../internal/metrics/metrics.go", "../internal/metrics/selfmon.go",
		"../internal/metrics/leaseguard.go", "../internal/xds/metrics.go", "../internal/xds/clients/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	crd, err := docgen.ReadCRD("../config/crd/bases/discovery.registrar.dev_serviceregistries.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return docgen.Render(docgen.Input{
		Flags: docgen.FlagsOf(newFlagSet(&c, &zopts)), Annotations: append(gate, annotations...),
		Vocabulary: vocabulary, Metrics: metrics, CRD: crd,
	})
}

// TestCRDDefaultsMatchAPI checks that the CRD's defaults, which kubebuilder markers cannot
// take from Go constants, agree with the defaults in api/v1beta1 that the webhook and the
// reconciler apply to a spec read without them.
func TestCRDDefaultsMatchAPI(t *testing.T) {
	crd, err := docgen.ReadCRD("../config/crd/bases/discovery.registrar.dev_serviceregistries.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var spec apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == v1beta1.GroupVersion.Version {
			spec = v.Schema.OpenAPIV3Schema.Properties["spec"]
		}
	}
	for _, c := range []struct {
		field, path string
		want        string
	}{
		{"drain.seconds", "drain/seconds", strconv.Itoa(int(v1beta1.DefaultDrainSeconds))},
		{"warmup.timeoutMillis", "warmup/timeoutMillis", strconv.Itoa(int(v1beta1.DefaultWarmupTimeoutMillis))},
		{"warmup.requestTimeoutMillis", "warmup/requestTimeoutMillis", strconv.Itoa(int(v1beta1.DefaultWarmupRequestTimeoutMillis))},
	} {
		p := spec
		for _, part := range strings.Split(c.path, "/") {
			p = p.Properties[part]
		}
		if p.Default == nil || string(p.Default.Raw) != c.want {
			t.Errorf("CRD default of spec.%s = %v, api/v1beta1 says %s", c.field, p.Default, c.want)
		}
	}
}

// TestVocabularyIsNotCopied fails when code outside api/v1beta1 spells a condition type, a
// reason or an Event reason as a string literal instead of using the constant of
// conditions.go.
func TestVocabularyIsNotCopied(t *testing.T) {
	v, err := docgen.ReadVocabulary("../api/v1beta1/conditions.go")
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{}
	for _, c := range v.Conditions {
		words[strconv.Quote(c.Type)] = true
	}
	for _, r := range v.Reasons {
		words[strconv.Quote(r.Value)] = true
	}
	for _, c := range append(v.Gate, v.Events...) {
		words[strconv.Quote(c.Value)] = true
	}
	for _, root := range []string{"../internal", "../cmd", "../pkg"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && words[lit.Value] {
					t.Errorf("%s: %s is a condition type or reason: use its constant in api/v1beta1/conditions.go", path, lit.Value)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
