package main

import (
	"slices"
	"testing"
)

func p(dir string) string { return module + "/" + dir }

// TestRulesFire breaks each rule on purpose, with a package graph that holds one forbidden
// import, and expects exactly that violation; the same graph without it passes.
func TestRulesFire(t *testing.T) {
	for _, tc := range broken {
		t.Run(tc.rule, func(t *testing.T) {
			got := Check([]Package{tc.pkg}, Rules)
			want := tc.pkg.Imports
			if len(want) == 0 {
				want = tc.pkg.Deps
			}
			if len(got) != 1 || got[0].Rule != tc.rule || got[0].Import != want[0] {
				t.Fatalf("Check = %v, want one violation of %q by %s", got, tc.rule, want[0])
			}
			clean := tc.pkg
			clean.Imports, clean.Deps = nil, nil
			if v := Check([]Package{clean}, Rules); len(v) != 0 {
				t.Errorf("without the import: %v", v)
			}
		})
	}
}

// broken are package graphs that each break one rule with one import.
var broken = []struct {
	rule string
	pkg  Package
}{
	{"api imports only api", Package{ImportPath: p("api/v1beta1"), Imports: []string{p("internal/eligibility")}}},
	{"api imports only api", Package{ImportPath: p("api/v1alpha1"), Imports: []string{p("pkg/wire")}}},
	{"pkg imports no internal package", Package{ImportPath: p("pkg/discovery"), Imports: []string{p("internal/store")}}},
	{"the product imports no test or benchmark code", Package{ImportPath: p("internal/controller"), Imports: []string{p("test/support/ports")}}},
	{"the product imports no test or benchmark code", Package{ImportPath: p("cmd"), Imports: []string{p("hack/imagetool")}}},
	{"the product imports no test or benchmark code", Package{ImportPath: p("internal/leancache"), Imports: []string{p("bench/benchfmt")}}},
	{"the product imports no test or benchmark code", Package{ImportPath: p("cmd/registrarctl"), Imports: []string{p("bench/controlplane")}}},
	{"deciding packages reach no client", Package{ImportPath: p("internal/plan"), Deps: []string{"k8s.io/client-go/kubernetes"}}},
	{"deciding packages reach no client", Package{ImportPath: p("internal/eligibility"), Deps: []string{"sigs.k8s.io/controller-runtime/pkg/client"}}},
	{"deciding packages reach no client", Package{ImportPath: p("internal/xds/locality"), Deps: []string{"google.golang.org/grpc"}}},
	{"deciding packages open no connection", Package{ImportPath: p("internal/regstatus"), Imports: []string{"net/http"}}},
	{"store backends do not import the planner", Package{ImportPath: p("internal/store/storetest"), Imports: []string{p("internal/plan")}}},
	{"store backends do not import the planner", Package{ImportPath: p("internal/store/etcd"), Imports: []string{p("internal/controller")}}},
	{"sinks do not import the store", Package{ImportPath: p("internal/publish"), Imports: []string{p("internal/store")}}},
	{"sinks do not import the store", Package{ImportPath: p("internal/xds"), Imports: []string{p("internal/store/etcd")}}},
}

// TestAllowed are imports the layers permit: a rule that matched them would stop real code.
func TestAllowed(t *testing.T) {
	pkgs := []Package{
		{ImportPath: p("api/v1alpha1"), Imports: []string{p("api/v1beta1"), "sigs.k8s.io/controller-runtime/pkg/conversion"}},
		{ImportPath: p("pkg/discovery"), Imports: []string{p("pkg/wire"), "go.etcd.io/etcd/client/v3", "google.golang.org/grpc"}},
		{ImportPath: p("internal/eligibility"), Imports: []string{p("api/v1beta1"), p("internal/store")}, Deps: []string{"k8s.io/apimachinery/pkg/types", "net/http"}},
		{ImportPath: p("internal/store/etcd"), Imports: []string{p("internal/store"), p("internal/store/etcdwatch"), "go.etcd.io/etcd/client/v3"}},
		{ImportPath: p("internal/xds"), Imports: []string{p("internal/publish"), p("pkg/wire"), "google.golang.org/grpc"}},
		{ImportPath: p("internal/controller"), Imports: []string{p("internal/plan"), p("internal/store"), "sigs.k8s.io/controller-runtime/pkg/client"}},
		{ImportPath: p("test/faults"), Imports: []string{p("internal/controller"), p("test/support/ports")}},
		{ImportPath: p("hack/layercheck"), Imports: []string{"os/exec"}},
		{ImportPath: p("test/xds"), Imports: []string{p("bench/benchfmt"), p("internal/xds")}},
		{ImportPath: p("bench/podbytes"), Imports: []string{p("bench/benchfmt"), p("internal/leancache")}},
		{ImportPath: p("bench/controlplane"), Imports: []string{p("api/v1beta1"), p("test/support/ports")}},
	}
	if v := Check(pkgs, Rules); len(v) != 0 {
		t.Errorf("Check = %v, want none", v)
	}
}

// TestEveryRuleIsBroken: every rule has a name of its own, says why, and is broken by a case
// of TestRulesFire (a rule no case breaks could be one that never fires).
func TestEveryRuleIsBroken(t *testing.T) {
	var names []string
	for _, r := range Rules {
		if slices.Contains(names, r.Name) {
			t.Errorf("two rules named %q", r.Name)
		}
		names = append(names, r.Name)
		if r.In == nil || r.Deny == nil || r.Why == "" {
			t.Errorf("rule %q lacks In, Deny or Why", r.Name)
		}
		if !slices.ContainsFunc(broken, func(b struct {
			rule string
			pkg  Package
		}) bool {
			return b.rule == r.Name
		}) {
			t.Errorf("no case of TestRulesFire breaks rule %q", r.Name)
		}
	}
}
