package ctl

import (
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// completeServices completes the first argument with the service names in the store.
func (r *runner) completeServices(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	services, ok := r.services(cmd, "")
	if !ok {
		return nil, cobra.ShellCompDirectiveError
	}
	return withPrefix(services, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeInstances completes SERVICE/ first, then SERVICE/NAMESPACE/POD of that service.
func (r *runner) completeInstances(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	service, _, hasSlash := strings.Cut(toComplete, "/")
	if !hasSlash {
		services, ok := r.services(cmd, "")
		if !ok {
			return nil, cobra.ShellCompDirectiveError
		}
		for i := range services {
			services[i] += "/"
		}
		return withPrefix(services, toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	q := r.quiet()
	if q.validate() != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	insts, code := q.read(cmd.Context(), service)
	if code != ExitOK {
		return nil, cobra.ShellCompDirectiveError
	}
	refs := make([]string, 0, len(insts))
	for _, inst := range insts {
		refs = append(refs, inst.Service+"/"+inst.Namespace+"/"+inst.Pod)
	}
	return withPrefix(refs, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// services reads the service names under the prefix, sorted.
func (r *runner) services(cmd *cobra.Command, service string) ([]string, bool) {
	q := r.quiet()
	if q.validate() != nil {
		return nil, false
	}
	insts, code := q.read(cmd.Context(), service)
	if code != ExitOK {
		return nil, false
	}
	seen := map[string]bool{}
	var out []string
	for _, inst := range insts {
		if !seen[inst.Service] {
			seen[inst.Service] = true
			out = append(out, inst.Service)
		}
	}
	sort.Strings(out)
	return out, true
}

// quiet is a copy of r that prints nothing on stderr (completion output goes to the shell).
func (r *runner) quiet() *runner {
	q := *r
	q.env.Stderr = io.Discard
	q.opts.output = ""
	return &q
}

func withPrefix(values []string, prefix string) []string {
	var out []string
	for _, v := range values {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	return out
}
