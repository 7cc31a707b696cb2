package ctl

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

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// printInstances prints a list in the chosen format.
func (r *runner) printInstances(insts []discovery.Instance) error {
	if ok, err := r.writeData(insts); ok {
		return err
	}
	return r.table(insts)
}

// printOne prints one instance: an object for json and yaml, a one-row table otherwise.
func (r *runner) printOne(inst discovery.Instance) error {
	if ok, err := r.writeData(inst); ok {
		return err
	}
	return r.table([]discovery.Instance{inst})
}

// writeData prints v for -o json, yaml and jsonpath and reports whether it did; the
// jsonpath template sees exactly what -o json prints (a list is a JSON array:
// -o jsonpath='{[*].address}').
func (r *runner) writeData(v any) (bool, error) {
	switch r.opts.output {
	case outputJSON:
		return true, writeJSON(r.env.Stdout, v)
	case outputYAML:
		return true, writeYAML(r.env.Stdout, v)
	case outputJSONPath:
		return true, writeJSONPath(r.env.Stdout, r.opts.jsonPath, v)
	}
	return false, nil
}

func (r *runner) table(insts []discovery.Instance) error {
	tw := tabwriter.NewWriter(r.env.Stdout, 0, 4, 2, ' ', 0)
	wide := r.opts.output == outputWide
	header := "SERVICE\tNAMESPACE\tPOD\tADDRESS\tPORTS\tAGE"
	if wide {
		header += "\tNODE\tZONE\tCLUSTER\tOWNER\tREVISION"
	}
	fmt.Fprintln(tw, header)
	now := r.env.Now()
	for _, inst := range insts {
		row := strings.Join([]string{inst.Service, inst.Namespace, inst.Pod, inst.Address, ports(inst.Ports), age(now, inst.RegisteredAt)}, "\t")
		if wide {
			row += "\t" + strings.Join([]string{dash(inst.Node), dash(inst.Zone), dash(inst.Cluster), dash(inst.Owner), strconv.FormatInt(inst.Revision, 10)}, "\t")
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
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

// ports is "name:port,..." in name order.
func ports(p map[string]int32) string {
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

// age is kubectl-style: 45s, 12m, 3h, 5d ("-" without a registration time).
func age(now, t time.Time) string {
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

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
