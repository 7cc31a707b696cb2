package docgen

import (
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Condition is a ServiceRegistry condition type and its documentation (Markdown, from its
// doc comment: what True, False and Unknown mean).
type Condition struct{ Type, Doc string }

// Reason is a reason constant: its value, the conditions and other places that carry it
// (the "Used by:" line of its doc comment) and what it means.
type Reason struct {
	Name, Value string
	UsedBy      []string
	Doc         string
}

// Vocabulary is api/v1beta1's conditions.go: condition types (prefix Condition), reasons
// (Reason), readiness gate reasons (Gate) and Event reasons (Event).
type Vocabulary struct {
	Conditions []Condition
	Reasons    []Reason
	Gate       []Constant
	Events     []Constant
}

// ReadVocabulary parses the Go file at path. A constant may take the value of another
// string constant of the file (GateWarmingUp = ReasonWarmingUp). It fails when a condition's
// doc lacks a list item saying what True, False or Unknown means ("- False, Unknown: …"), when a reason has no "Used by:" line,
// or names there a condition type the file does not define, so the reference cannot
// silently drift from the code.
func ReadVocabulary(path string) (Vocabulary, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return Vocabulary{}, fmt.Errorf("parse %s: %w", path, err)
	}
	values := map[string]string{}
	var v Vocabulary
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				value, ok := stringValue(vs.Values[i], values)
				if !ok {
					continue
				}
				values[name.Name] = value
				raw := ""
				switch {
				case vs.Doc != nil:
					raw = vs.Doc.Text()
				case vs.Comment != nil:
					raw = vs.Comment.Text()
				}
				switch n := name.Name; {
				case strings.HasPrefix(n, "Condition"):
					for _, status := range []string{"True", "False", "Unknown"} {
						if !regexp.MustCompile(`(?m)^\s*- [^:]*\b` + status + `\b[^:]*:`).MatchString(raw) {
							return Vocabulary{}, fmt.Errorf("%s: condition %s does not say what %s means (a \"- %s\" item)", path, n, status, status)
						}
					}
					v.Conditions = append(v.Conditions, Condition{Type: value, Doc: markdown(withoutNameRaw(raw, n))})
				case strings.HasPrefix(n, "Reason"):
					doc, usedBy := cutUsedBy(raw)
					if len(usedBy) == 0 {
						return Vocabulary{}, fmt.Errorf("%s: reason %s has no \"Used by:\" line", path, n)
					}
					v.Reasons = append(v.Reasons, Reason{Name: n, Value: value, UsedBy: usedBy, Doc: withoutName(oneLine(doc), n)})
				case strings.HasPrefix(n, "Gate"):
					v.Gate = append(v.Gate, Constant{Name: n, Value: value, Doc: withoutName(oneLine(raw), n)})
				case strings.HasPrefix(n, "Event"):
					v.Events = append(v.Events, Constant{Name: n, Value: value, Doc: withoutName(oneLine(raw), n)})
				}
			}
		}
	}
	types := map[string]bool{}
	for _, c := range v.Conditions {
		types[c.Type] = true
	}
	for _, r := range v.Reasons {
		for _, u := range r.UsedBy {
			if first := strings.Fields(u)[0]; isCapitalized(first) && !types[first] && !knownPlace(u) {
				return Vocabulary{}, fmt.Errorf("%s: reason %s is used by %q, which is no condition type", path, r.Name, u)
			}
		}
	}
	sort.SliceStable(v.Reasons, func(i, j int) bool { return v.Reasons[i].Value < v.Reasons[j].Value })
	return v, nil
}

// knownPlace lists what, besides conditions, a "Used by:" line may name.
func knownPlace(u string) bool {
	return u == "Events" || strings.HasSuffix(u, " Event") || u == "readiness gate"
}

func isCapitalized(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

// stringValue is the value of a string literal, or of a string constant defined earlier.
func stringValue(e ast.Expr, values map[string]string) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := values[x.Name]
		return s, ok
	}
	return "", false
}

// fileStringConsts are the string constants a file declares with a literal value.
func fileStringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if s, ok := stringValue(vs.Values[i], out); ok {
						out[name.Name] = s
					}
				}
			}
		}
	}
	return out
}

// cutUsedBy removes the "Used by: a, b." line from a doc comment and returns its items.
func cutUsedBy(raw string) (string, []string) {
	var keep []string
	var used []string
	for _, line := range strings.Split(raw, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Used by:"); ok {
			for _, u := range strings.Split(strings.TrimSuffix(strings.TrimSpace(rest), "."), ",") {
				if u = strings.TrimSpace(u); u != "" {
					used = append(used, u)
				}
			}
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n"), used
}

// withoutNameRaw is withoutName for a multi-line doc comment: only its first word goes.
func withoutNameRaw(raw, name string) string {
	rest, ok := strings.CutPrefix(raw, name)
	if !ok {
		return raw
	}
	rest = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(rest, ","), " is "), " ")
	if rest == "" {
		return raw
	}
	return strings.ToUpper(rest[:1]) + rest[1:]
}

// markdown renders a Go doc comment (paragraphs, lists) as Markdown.
func markdown(raw string) string {
	var p comment.Parser
	var pr comment.Printer
	return strings.TrimSpace(string(pr.Markdown(p.Parse(raw))))
}

// Metric is one Prometheus metric registrar serves.
type Metric struct {
	Name, Type, Help string
	Labels           []string
}

// Metrics parses Go files for prometheus.New{Counter,Gauge,Histogram,Summary}[Vec] calls
// with literal options, and returns the metrics sorted by name.
func Metrics(paths ...string) ([]Metric, error) {
	var out []Metric
	for _, path := range paths {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		consts := fileStringConsts(f)
		var perr error
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(sel.Sel.Name, "New") || len(call.Args) == 0 {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" {
				return true
			}
			typ := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(sel.Sel.Name, "New"), "Vec"))
			switch typ {
			case "counter", "gauge", "histogram", "summary":
			default:
				return true
			}
			opts, ok := call.Args[0].(*ast.CompositeLit)
			if !ok {
				return true
			}
			m := Metric{Type: typ}
			for _, el := range opts.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil {
					continue
				}
				if s, ok := stringValue(kv.Value, consts); ok {
					switch key.Name {
					case "Name":
						m.Name = s
					case "Help":
						m.Help = s
					}
				}
			}
			if len(call.Args) > 1 {
				if labels, ok := call.Args[1].(*ast.CompositeLit); ok {
					for _, el := range labels.Elts {
						s, ok := stringValue(el, consts)
						if !ok {
							perr = fmt.Errorf("%s: a label of %s that is neither a string literal nor a string constant of the file", path, sel.Sel.Name)
							return false
						}
						m.Labels = append(m.Labels, s)
					}
				}
			}
			if m.Name == "" {
				perr = fmt.Errorf("%s: a %s without a literal Name", path, sel.Sel.Name)
				return false
			}
			out = append(out, m)
			return true
		})
		if perr != nil {
			return nil, perr
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
