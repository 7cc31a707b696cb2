// Command layercheck fails when a package imports across a layer boundary: the rules of
// rules.go, which docs/development.md ("Layers") lists. `make lint` runs it:
//
//	go run ./hack/layercheck        # every package of the module (also those behind build tags)
//	go run ./hack/layercheck -list  # the rules
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// buildTags are the tags the module's test suites use, so their packages are checked too.
const buildTags = "e2e,interop,eurekapeer"

func main() {
	list := flag.Bool("list", false, "print the rules and exit")
	flag.Parse()
	if *list {
		for _, r := range Rules {
			fmt.Printf("- %s: %s\n", r.Name, r.Why)
		}
		return
	}
	pkgs, err := goList("./...")
	if err != nil {
		fmt.Fprintln(os.Stderr, "layercheck:", err)
		os.Exit(2)
	}
	if v := Check(pkgs, Rules); len(v) > 0 {
		for _, x := range v {
			fmt.Fprintln(os.Stderr, "layercheck:", x)
		}
		fmt.Fprintf(os.Stderr, "layercheck: %d imports across a layer (docs/development.md, \"Layers\"; the rules in hack/layercheck/rules.go)\n", len(v))
		os.Exit(1)
	}
	fmt.Printf("layercheck: %d packages, %d rules, no import across a layer\n", len(pkgs), len(Rules))
}

// goList runs `go list -json` on patterns and decodes its stream of packages.
func goList(patterns ...string) ([]Package, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", append([]string{"list", "-tags", buildTags, "-json=ImportPath,Imports,Deps"}, patterns...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(&stdout)
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}
