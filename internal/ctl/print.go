package ctl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/registrar-dev/registrar/internal/ctl/output"
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

// out prints in the -o format to stdout.
func (r *runner) out() output.Printer {
	return output.Printer{Format: r.opts.output, JSONPath: r.opts.jsonPath, Out: r.env.Stdout}
}

// writeData prints v for -o json, yaml and jsonpath and reports whether it did
// (output.Printer.Data).
func (r *runner) writeData(v any) (bool, error) { return r.out().Data(v) }

func (r *runner) table(insts []discovery.Instance) error {
	tw := r.out().Table()
	wide := r.out().Wide()
	header := "SERVICE\tNAMESPACE\tPOD\tADDRESS\tPORTS\tAGE"
	if wide {
		header += "\tNODE\tZONE\tCLUSTER\tOWNER\tREVISION"
	}
	fmt.Fprintln(tw, header)
	now := r.env.Now()
	for _, inst := range insts {
		row := strings.Join([]string{inst.Service, inst.Namespace, inst.Pod, inst.Address, output.Ports(inst.Ports), output.Age(now, inst.RegisteredAt)}, "\t")
		if wide {
			row += "\t" + strings.Join([]string{output.Dash(inst.Node), output.Dash(inst.Zone), output.Dash(inst.Cluster), output.Dash(inst.Owner), strconv.FormatInt(inst.Revision, 10)}, "\t")
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}
