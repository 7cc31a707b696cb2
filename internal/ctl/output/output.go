// Package output is how registrarctl prints: the -o formats (a table, wide, json, yaml,
// jsonpath=TEMPLATE) and their parsing, a Printer that writes any value in the data
// formats (a list as a JSON array, a watch event as one line or one YAML document), the
// tables' writer, and the cells every table shares (ports, kubectl-style ages, a dash for
// empty, seconds with a unit). It reads nothing: internal/ctl's commands build the values
// and the rows.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// The -o output formats ("" is the default table).
const (
	Wide     = "wide"
	JSON     = "json"
	YAML     = "yaml"
	JSONPath = "jsonpath"
)

// Formats are the values of -o (jsonpath takes a template: -o jsonpath='{[*].pod}').
var Formats = []string{Wide, JSON, YAML, JSONPath + "="}

// Parse reads -o: the format, and for jsonpath=TEMPLATE the parsed template (format
// JSONPath).
func Parse(o string) (string, *jsonpath.JSONPath, error) {
	switch o {
	case "", Wide, JSON, YAML:
		return o, nil, nil
	}
	tmpl, ok := strings.CutPrefix(o, "jsonpath=")
	if !ok {
		return "", nil, fmt.Errorf("-o %q: want wide, json, yaml or jsonpath=TEMPLATE", o)
	}
	jp := jsonpath.New("output").AllowMissingKeys(true)
	if err := jp.Parse(tmpl); err != nil {
		return "", nil, fmt.Errorf("-o jsonpath: %w", err)
	}
	return JSONPath, jp, nil
}

// Printer writes in one -o format to Out.
type Printer struct {
	// Format is "" (a table), Wide, JSON, YAML or JSONPath (with JSONPath set).
	Format   string
	JSONPath *jsonpath.JSONPath
	Out      io.Writer
}

// Wide tells whether tables get their wide columns.
func (p Printer) Wide() bool { return p.Format == Wide }

// Table is a writer for a table's tab-separated rows to Out (flush it at the end).
func (p Printer) Table() *tabwriter.Writer { return NewTable(p.Out) }

// NewTable is a writer for a table's tab-separated rows to w, aligned as every
// registrarctl table (flush it at the end).
func NewTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// Data prints v for -o json, yaml and jsonpath and reports whether it did; the jsonpath
// template sees exactly what -o json prints (a list is a JSON array:
// -o jsonpath='{[*].address}').
func (p Printer) Data(v any) (bool, error) {
	switch p.Format {
	case JSON:
		return true, writeJSON(p.Out, v)
	case YAML:
		return true, writeYAML(p.Out, v)
	case JSONPath:
		return true, writeJSONPath(p.Out, p.JSONPath, v)
	}
	return false, nil
}

// Event prints one event of a stream for -o json (one line), yaml (one document) and
// jsonpath, and reports whether it did.
func (p Printer) Event(v any) (bool, error) {
	switch p.Format {
	case JSON:
		b, err := json.Marshal(v)
		if err != nil {
			return true, fmt.Errorf("encode json: %w", err)
		}
		_, err = fmt.Fprintf(p.Out, "%s\n", b)
		return true, err
	case YAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, fmt.Errorf("encode yaml: %w", err)
		}
		_, err = fmt.Fprintf(p.Out, "---\n%s", b)
		return true, err
	case JSONPath:
		return true, writeJSONPath(p.Out, p.JSONPath, v)
	}
	return false, nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeJSONPath executes the template on v's JSON form, as kubectl does (no newline is
// added: end the template with {"\n"} for one).
func writeJSONPath(w io.Writer, jp *jsonpath.JSONPath, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	var data any
	if err := json.Unmarshal(b, &data); err != nil {
		return fmt.Errorf("decode json: %w", err)
	}
	if err := jp.Execute(w, data); err != nil {
		return fmt.Errorf("jsonpath: %w", err)
	}
	return nil
}

func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// Ports is "name:port,..." in name order.
func Ports(p map[string]int32) string {
	if len(p) == 0 {
		return "-"
	}
	names := make([]string, 0, len(p))
	for n := range p {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%s:%d", n, p[n])
	}
	return strings.Join(out, ",")
}

// Age is kubectl-style: 45s, 12m, 3h, 5d ("-" without a registration time).
func Age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// Dash is s, or "-" when it is empty.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Seconds formats seconds with a unit that fits ("-" for none).
func Seconds(v *float64) string {
	if v == nil {
		return "-"
	}
	switch {
	case *v < 1:
		return strconv.FormatFloat(*v*1000, 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(*v, 'f', 2, 64) + "s"
	}
}
