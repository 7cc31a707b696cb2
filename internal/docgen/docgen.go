// Package docgen renders the configuration reference (docs/reference.md) from the code:
// the manager's flag set, the documented constants of api/v1beta1 (annotations, labels,
// condition types and reasons, Event reasons), the Prometheus metrics the manager registers
// and the ServiceRegistry CRD's OpenAPI schema. Its output depends only on
// its input, so a stale reference is caught by comparing it with the committed file.
package docgen

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Flag is one command-line flag.
type Flag struct{ Name, Type, Default, Usage string }

// Constant is a documented string constant.
type Constant struct{ Name, Value, Doc string }

// Input is everything the reference is made of.
type Input struct {
	Flags       []Flag
	Annotations []Constant
	Vocabulary  Vocabulary
	Metrics     []Metric
	CRD         *apiextensionsv1.CustomResourceDefinition
}

// FlagsOf lists the flags of fs by name, with the type flag.UnquoteUsage derives.
func FlagsOf(fs *flag.FlagSet) []Flag {
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		if typ == "" {
			typ = "bool"
		}
		out = append(out, Flag{Name: f.Name, Type: typ, Default: f.DefValue, Usage: usage})
	})
	return out
}

// Constants parses the Go file at path and returns its string constants whose names start
// with one of prefixes, in source order. A constant's doc is its own comment (above or
// trailing), else the comment of its group.
func Constants(path string, prefixes ...string) ([]Constant, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	var out []Constant
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		var group string
		if gd.Doc != nil {
			group = gd.Doc.Text()
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if vs.Doc != nil {
				group = vs.Doc.Text()
			}
			out = append(out, constantsOf(vs, group, prefixes)...)
		}
	}
	return out, nil
}

func constantsOf(vs *ast.ValueSpec, group string, prefixes []string) []Constant {
	var out []Constant
	for i, name := range vs.Names {
		if !hasPrefix(name.Name, prefixes) || i >= len(vs.Values) {
			continue
		}
		lit, ok := vs.Values[i].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			continue
		}
		value, err := strconv.Unquote(lit.Value)
		if err != nil {
			continue
		}
		doc := group
		switch {
		case vs.Comment != nil:
			doc = vs.Comment.Text()
		case vs.Doc != nil:
			doc = vs.Doc.Text()
		}
		out = append(out, Constant{Name: name.Name, Value: value, Doc: withoutName(oneLine(doc), name.Name)})
	}
	return out
}

// withoutName drops the Go identifier a doc comment starts with ("ConditionReady is True
// when" becomes "True when"), which means nothing to a reader of the reference, and
// capitalizes the rest.
func withoutName(doc, name string) string {
	if rest, ok := strings.CutPrefix(doc, name); ok {
		if rest = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(rest, ":"), ","), " is "), " "); rest != "" {
			doc = rest
		}
	}
	if doc == "" {
		return doc
	}
	return strings.ToUpper(doc[:1]) + doc[1:]
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// ReadCRD reads a CustomResourceDefinition from a YAML file.
func ReadCRD(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return crd, nil
}

// oneLine joins a comment's lines and escapes what would break a Markdown table cell.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
