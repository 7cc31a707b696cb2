// Package breakers is what registrarctl breakers shows of the callers' coordinated circuit
// breakers (pkg/discovery): each service's shared state under
// {prefix}/.registrar/breakers/, the caller holding the half-open probe permit and the
// callers that reported their own breaker tripped, read from the keys (Read) and printed
// (Print). Per-instance breakers live in each caller's memory, not in the store.
package breakers

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/registrar-dev/registrar/internal/ctl/output"
	"github.com/registrar-dev/registrar/pkg/discovery"
)

// View is one service's coordinated breaker as the store has it.
type View struct {
	Service string `json:"service"`
	// State is Open or Closed (Closed when the service has no state key yet).
	State   string    `json:"state"`
	OpenFor string    `json:"openFor,omitempty"`
	By      string    `json:"by,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at,omitzero"`
	Probe   *Probe    `json:"probe,omitempty"`
	Reports []Report  `json:"reports,omitempty"`
}

// Probe is the caller holding the fleet's half-open probe permit.
type Probe struct {
	Caller string    `json:"caller"`
	At     time.Time `json:"at,omitzero"`
	Lease  string    `json:"lease,omitempty"`
}

// Report is a caller whose own breaker tripped and reported (a vote toward the quorum).
type Report struct {
	Caller string    `json:"caller"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// Read makes the views of the breaker keys kvs, all of them under prefix (every
// service's breakers: discovery.BreakerPrefix(storePrefix, "")), sorted by service and
// caller. A key whose value cannot be decoded is skipped and handed to skip.
func Read(kvs []*mvccpb.KeyValue, prefix string, skip func(key []byte, err error)) []View {
	all := prefix
	byService := map[string]*View{}
	get := func(svc string) *View {
		v := byService[svc]
		if v == nil {
			v = &View{Service: svc, State: "Closed"}
			byService[svc] = v
		}
		return v
	}
	for _, kv := range kvs {
		rel := strings.TrimPrefix(string(kv.Key), all)
		svc, rest, _ := strings.Cut(rel, "/")
		switch {
		case rest == "state":
			rec, err := discovery.DecodeBreakerRecord(kv.Value)
			if err != nil {
				skip(kv.Key, err)
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
				skip(kv.Key, err)
				continue
			}
			p := &Probe{Caller: rec.Caller, At: rec.At}
			if kv.Lease != 0 {
				p.Lease = fmt.Sprintf("%x", kv.Lease)
			}
			get(svc).Probe = p
		case strings.HasPrefix(rest, "reports/"):
			var rec discovery.ReportRecord
			if err := json.Unmarshal(kv.Value, &rec); err != nil {
				skip(kv.Key, err)
				continue
			}
			v := get(svc)
			v.Reports = append(v.Reports, Report{Caller: strings.TrimPrefix(rest, "reports/"), Reason: rec.Reason, At: rec.At})
		}
	}
	views := make([]View, 0, len(byService))
	for _, v := range byService {
		sort.Slice(v.Reports, func(i, j int) bool { return v.Reports[i].Caller < v.Reports[j].Caller })
		views = append(views, *v)
	}
	sort.Slice(views, func(i, j int) bool { return views[i].Service < views[j].Service })
	return views
}

// Print prints the views in p's format: as a table, one row for each service's shared
// breaker, then one per caller that holds the probe permit or reported its own breaker
// tripped; now is the clock of the AGE column.
func Print(p output.Printer, views []View, now time.Time) error {
	if ok, err := p.Data(views); ok {
		return err
	}
	tw := p.Table()
	wide := p.Wide()
	header := "SERVICE\tCALLER\tSTATE\tAGE\tDETAIL"
	if wide {
		header += "\tBY\tOPEN-FOR\tLEASE"
	}
	fmt.Fprintln(tw, header)
	for _, v := range views {
		detail := v.Reason
		if detail == "" {
			detail = "-"
		}
		row := []string{v.Service, "(fleet)", v.State, output.Age(now, v.At), detail}
		if wide {
			row = append(row, output.Dash(v.By), output.Dash(v.OpenFor), "-")
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
		if pr := v.Probe; pr != nil {
			row := []string{v.Service, pr.Caller, "Probing", output.Age(now, pr.At), "holds the fleet's half-open permit"}
			if wide {
				row = append(row, "-", "-", output.Dash(pr.Lease))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		for _, rep := range v.Reports {
			row := []string{v.Service, rep.Caller, "Tripped", output.Age(now, rep.At), output.Dash(rep.Reason)}
			if wide {
				row = append(row, "-", "-", "-")
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	return tw.Flush()
}
