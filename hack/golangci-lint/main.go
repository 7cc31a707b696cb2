// Command golangci-lint is golangci-lint with the Kube API Linter (sigs.k8s.io/kube-api-linter)
// compiled in as a module plugin, as `golangci-lint custom` would build it, but from the Go
// module proxy alone (custom clones a repository). It lives in its own module so that the
// linters' dependencies stay out of registrar's go.mod; hack/golangci-lint.sh builds it into
// bin/ (make lint).
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	// Registers the "kubeapilinter" module plugin (.golangci.yml, linters.settings.custom).
	_ "sigs.k8s.io/kube-api-linter"
)

func main() {
	info := commands.BuildInfo{Version: "unknown", Commit: "?", Date: "(unknown)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion, info.BuildInfo = bi.GoVersion, bi
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/golangci/golangci-lint/v2" {
				info.Version = dep.Version + " (with kube-api-linter)"
			}
		}
	}
	if err := commands.Execute(info); err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "Failed executing command with error: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}
