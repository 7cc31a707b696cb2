package main

import (
	"fmt"
	"slices"
	"strings"
)

// Rule forbids packages matched by In to import packages matched by Deny: directly (the
// package's non-test imports), or anywhere in its dependencies when Transitive.
type Rule struct {
	Name, Why  string
	In, Deny   func(importPath string) bool
	Transitive bool
}

// Package is what `go list -json` says of a package (the fields the rules read).
type Package struct {
	ImportPath string
	Imports    []string // direct, non-test
	Deps       []string // transitive, non-test
}

// Violation is one forbidden import.
type Violation struct {
	Rule, Package, Import string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s imports %s: %s", strings.TrimPrefix(v.Package, module+"/"), v.Import, v.Rule)
}

// Check returns every import of pkgs that a rule forbids, sorted.
func Check(pkgs []Package, rules []Rule) []Violation {
	var out []Violation
	for _, p := range pkgs {
		for _, r := range rules {
			if !r.In(p.ImportPath) {
				continue
			}
			imports := p.Imports
			if r.Transitive {
				imports = p.Deps
			}
			for _, imp := range imports {
				if r.Deny(imp) {
					out = append(out, Violation{Rule: r.Name, Package: p.ImportPath, Import: imp})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Violation) int { return strings.Compare(a.String(), b.String()) })
	return out
}
