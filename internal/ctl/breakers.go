package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// breakerView is one service's coordinated breaker as the store has it.
type breakerView struct {
	Service string `json:"service"`
	// State is Open or Closed (Closed when the service has no state key yet).
	State   string       `json:"state"`
	OpenFor string       `json:"openFor,omitempty"`
	By      string       `json:"by,omitempty"`
	Reason  string       `json:"reason,omitempty"`
	At      time.Time    `json:"at,omitzero"`
	Probe   *probeView   `json:"probe,omitempty"`
	Reports []reportView `json:"reports,omitempty"`
}

type probeView struct {
	Caller string    `json:"caller"`
	At     time.Time `json:"at,omitzero"`
	Lease  string    `json:"lease,omitempty"`
}

type reportView struct {
	Caller string    `json:"caller"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// breakers prints the coordinated breakers of every service, or of SERVICE: the fleet's
// shared state, the caller holding the half-open probe permit, and the callers whose own
// breaker tripped and reported (the votes toward the quorum). Per-instance breakers live
// in each caller's memory, not in the store: see the callers' metrics for those.
func (r *runner) breakers(ctx context.Context, args []string) int {
	service := ""
	if len(args) == 1 {
		service = args[0]
		if strings.Contains(service, "/") {
			return r.fail(ExitUsage, "breakers takes a service name, not %q", service)
		}
	}
	cli, err := r.connect()
	if err != nil {
		return r.fail(ExitError, "%v", err)
	}
	defer func() { _ = cli.Close() }()
	prefix := discovery.BreakerPrefix(r.opts.prefix, service)
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		code := storeCode(err)
		if code == ExitUnreachable {
			return r.fail(code, "store %s unreachable: %v", r.opts.endpoints, err)
		}
		return r.fail(code, "list %s: %v", prefix, err)
	}
	all := discovery.BreakerPrefix(r.opts.prefix, "")
	byService := map[string]*breakerView{}
	get := func(svc string) *breakerView {
		v := byService[svc]
		if v == nil {
			v = &breakerView{Service: svc, State: "Closed"}
			byService[svc] = v
		}
		return v
	}
	for _, kv := range resp.Kvs {
		rel := strings.TrimPrefix(string(kv.Key), all)
		svc, rest, _ := strings.Cut(rel, "/")
		switch {
		case rest == "state":
			rec, err := discovery.DecodeBreakerRecord(kv.Value)
			if err != nil {
				fmt.Fprintf(r.env.Stderr, "registrarctl: skipping %s: %v\n", kv.Key, err)
				continue
			}
			v := get(svc)
			v.State, v.By, v.Reason, v.At = rec.State, rec.By, rec.Reason, rec.At
			if rec.OpenFor > 0 {
				v.OpenFor = time.Duration(rec.OpenFor).String()
			}
		case rest == "probe":
			var rec discovery.ProbeRecord
			if err := json.Unmarshal(kv.Value, &rec); err != nil {
				fmt.Fprintf(r.env.Stderr, "registrarctl: skipping %s: %v\n", kv.Key, err)
				continue
			}
			p := &probeView{Caller: rec.Caller, At: rec.At}
			if kv.Lease != 0 {
				p.Lease = fmt.Sprintf("%x", kv.Lease)
			}
			get(svc).Probe = p
		case strings.HasPrefix(rest, "reports/"):
			var rec discovery.ReportRecord
			if err := json.Unmarshal(kv.Value, &rec); err != nil {
				fmt.Fprintf(r.env.Stderr, "registrarctl: skipping %s: %v\n", kv.Key, err)
				continue
			}
			v := get(svc)
			v.Reports = append(v.Reports, reportView{Caller: strings.TrimPrefix(rest, "reports/"), Reason: rec.Reason, At: rec.At})
		}
	}
	views := make([]breakerView, 0, len(byService))
	for _, v := range byService {
		sort.Slice(v.Reports, func(i, j int) bool { return v.Reports[i].Caller < v.Reports[j].Caller })
		views = append(views, *v)
	}
	sort.Slice(views, func(i, j int) bool { return views[i].Service < views[j].Service })
	if err := r.printBreakers(views); err != nil {
		return r.fail(ExitError, "%v", err)
	}
	if service != "" && len(views) == 0 {
		return r.fail(ExitNotFound, "no coordinated breaker for %q under %s", service, r.opts.prefix)
	}
	return ExitOK
}

// printBreakers prints one row for each service's shared breaker, then one per caller that
// holds the probe permit or reported its own breaker tripped.
func (r *runner) printBreakers(views []breakerView) error {
	if ok, err := r.writeData(views); ok {
		return err
	}
	tw := tabwriter.NewWriter(r.env.Stdout, 0, 4, 2, ' ', 0)
	wide := r.opts.output == outputWide
	header := "SERVICE\tCALLER\tSTATE\tAGE\tDETAIL"
	if wide {
		header += "\tBY\tOPEN-FOR\tLEASE"
	}
	fmt.Fprintln(tw, header)
	now := r.env.Now()
	for _, v := range views {
		detail := v.Reason
		if detail == "" {
			detail = "-"
		}
		row := []string{v.Service, "(fleet)", v.State, age(now, v.At), detail}
		if wide {
			row = append(row, dash(v.By), dash(v.OpenFor), "-")
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
		if p := v.Probe; p != nil {
			row := []string{v.Service, p.Caller, "Probing", age(now, p.At), "holds the fleet's half-open permit"}
			if wide {
				row = append(row, "-", "-", dash(p.Lease))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		for _, rep := range v.Reports {
			row := []string{v.Service, rep.Caller, "Tripped", age(now, rep.At), dash(rep.Reason)}
			if wide {
				row = append(row, "-", "-", "-")
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	return tw.Flush()
}
