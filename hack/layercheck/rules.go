package main

import "strings"

// module is the import path every rule is relative to.
const module = "github.com/registrar-dev/registrar"

// clientLibraries are the packages that talk to another process. A package that decides
// (eligibility, plans, status, ...) reaches none of them, not even through another package:
// its inputs are facts, so its table tests need no server and no mock.
var clientLibraries = []string{
	"k8s.io/client-go",
	"sigs.k8s.io/controller-runtime/pkg/client",
	"sigs.k8s.io/controller-runtime/pkg/manager",
	"go.etcd.io/etcd/client",
	"github.com/go-zookeeper/zk",
	"google.golang.org/grpc",
}

// deciding are the pure packages: they decide from facts and an injected clock.
var deciding = []string{
	"internal/annotations",
	"internal/backoff",
	"internal/echo",
	"internal/eligibility",
	"internal/injector",
	"internal/leaseguard",
	"internal/plan",
	"internal/regstatus",
	"internal/selindex",
	"internal/slowstart",
	"internal/tenancy",
	"internal/xds/locality",
}

// Rules are the layering rules `make lint` enforces (docs/development.md, "Layers").
var Rules = []Rule{
	{
		Name: "api imports only api",
		Why:  "the API types are what users and other projects import; they must not drag in the operator",
		In:   under("api"),
		Deny: func(imp string) bool { return ours(imp) && !under("api")(imp) },
	},
	{
		Name: "pkg imports no internal package",
		Why:  "pkg/ is the callers' library (pkg/discovery, pkg/wire); callers cannot import internal/",
		In:   under("pkg"),
		Deny: func(imp string) bool { return ours(imp) && !under("pkg")(imp) && !under("api")(imp) },
	},
	{
		Name: "the product imports no test or benchmark code",
		Why:  "test/, hack/ and bench/ hold harnesses, tools and benchmarks; the binaries must build without them",
		In:   anyOf(under("api"), under("pkg"), under("internal"), under("cmd")),
		Deny: anyOf(under("test"), under("hack"), under("bench")),
	},
	{
		Name:       "deciding packages reach no client",
		Why:        "decisions are pure: facts in, verdict out, table-tested with an injected clock",
		In:         anyOf(inList(deciding)...),
		Deny:       prefixedBy(clientLibraries...),
		Transitive: true,
	},
	{
		Name: "deciding packages open no connection",
		Why:  "decisions are pure: no network, no process",
		In:   anyOf(inList(deciding)...),
		Deny: func(imp string) bool { return imp == "net" || imp == "net/http" || imp == "os/exec" },
	},
	{
		Name: "store backends do not import the planner",
		Why:  "a store applies changes it is given; what to change is internal/plan's, above it",
		In:   under("internal/store"),
		Deny: anyOf(under("internal/plan"), under("internal/controller")),
	},
	{
		Name: "sinks do not import the store",
		Why:  "the xDS server follows the reconciler's verdicts (internal/publish), not the store, so the two cannot disagree",
		In:   anyOf(under("internal/publish"), under("internal/xds")),
		Deny: under("internal/store"),
	},
}

// ours reports whether imp is a package of this module.
func ours(imp string) bool { return imp == module || strings.HasPrefix(imp, module+"/") }

// under matches the module's package dir and everything below it.
func under(dir string) func(string) bool {
	p := module + "/" + dir
	return func(imp string) bool { return imp == p || strings.HasPrefix(imp, p+"/") }
}

// inList matches each of the module's packages dirs exactly (not below).
func inList(dirs []string) []func(string) bool {
	out := make([]func(string) bool, 0, len(dirs))
	for _, d := range dirs {
		p := module + "/" + d
		out = append(out, func(imp string) bool { return imp == p })
	}
	return out
}

// prefixedBy matches the packages at or below any of the import paths.
func prefixedBy(paths ...string) func(string) bool {
	return func(imp string) bool {
		for _, p := range paths {
			if imp == p || strings.HasPrefix(imp, p+"/") {
				return true
			}
		}
		return false
	}
}

// anyOf matches what any of fs matches.
func anyOf(fs ...func(string) bool) func(string) bool {
	return func(s string) bool {
		for _, f := range fs {
			if f(s) {
				return true
			}
		}
		return false
	}
}
