package main

import (
	"strings"
	"testing"

	"github.com/registrar-dev/registrar/internal/tenancy"
)

func TestServiceNameTenancyFlag(t *testing.T) {
	c, _, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.tenancy != tenancy.ModeNamespace {
		t.Fatalf("default --service-name-tenancy=%q, want %q", c.tenancy, tenancy.ModeNamespace)
	}
	if c, _, err = parseFlags([]string{"--service-name-tenancy=shared"}); err != nil || c.tenancy != tenancy.ModeShared {
		t.Errorf("--service-name-tenancy=shared: %q, %v", c.tenancy, err)
	}
	if _, _, err := parseFlags([]string{"--service-name-tenancy=cluster"}); err == nil || !strings.Contains(err.Error(), "service-name-tenancy") {
		t.Errorf("--service-name-tenancy=cluster: error %v, want one naming the flag", err)
	}
}
