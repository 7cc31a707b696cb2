package main

import (
	"flag"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/registrar-dev/registrar/internal/docgen"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/reference.md (make docs)")

const referenceFile = "../docs/reference.md"

// TestConfigurationReference renders docs/reference.md from the manager's flag set, the
// constants of api/v1alpha1 and the CRD, and fails when the committed file differs.
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
	annotations, err := docgen.Constants("../api/v1alpha1/serviceregistry_types.go", "ReadinessGate", "Annotation", "Label")
	if err != nil {
		t.Fatal(err)
	}
	conditions, err := docgen.Constants("../api/v1alpha1/serviceregistry_types.go", "Condition")
	if err != nil {
		t.Fatal(err)
	}
	crd, err := docgen.ReadCRD("../config/crd/bases/discovery.registrar.dev_serviceregistries.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return docgen.Render(docgen.Input{
		Flags: docgen.FlagsOf(newFlagSet(&c, &zopts)), Annotations: annotations, Conditions: conditions, CRD: crd,
	})
}
