package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// perTransition is n over the run's transitions (0 without any).
func (r *Run) perTransition(n float64) float64 {
	if r.Transitions == 0 {
		return 0
	}
	return n / float64(r.Transitions)
}

// KiBPerTransition is what every client of the mode together received per pod transition.
func (m ModeBytes) KiBPerTransition(r *Run) float64 { return r.perTransition(float64(m.Bytes) / 1024) }

// KiBPerClientTransition is what one client of the mode received per pod transition.
func (m ModeBytes) KiBPerClientTransition(r *Run) float64 {
	if m.Clients == 0 {
		return 0
	}
	return m.KiBPerTransition(r) / float64(m.Clients)
}

// PushesPerClient are the assignment's pushes one client of the mode received.
func (m ModeBytes) PushesPerClient() float64 {
	if m.Clients == 0 {
		return 0
	}
	return float64(m.EDSResponses) / float64(m.Clients)
}

// KiBPerPush is the mean size of one push of the assignment.
func (m ModeBytes) KiBPerPush() float64 {
	if m.EDSResponses == 0 {
		return 0
	}
	return float64(m.EDSBytes) / 1024 / float64(m.EDSResponses)
}

// UncoalescedMiB is what the clients of both modes would have received with one push of
// the whole assignment per transition (no coalescing: O(pods²) over a rollout).
func (r *Run) UncoalescedMiB() float64 {
	return float64(r.Transitions) * float64(r.AssignmentBytes) * float64(r.Config.XDSClients) / (1 << 20)
}

// XDSMiB is what every xDS client received over the rollout.
func (r *Run) XDSMiB() float64 { return float64(r.SotwBytes.Bytes+r.DeltaBytes.Bytes) / (1 << 20) }

// WatchKiBPerTransition is what every discovery watcher together received from the store per
// transition; WatchBytesPerWatcherTransition what one did.
func (r *Run) WatchKiBPerTransition() float64 { return r.perTransition(float64(r.WatchBytes) / 1024) }

func (r *Run) WatchBytesPerWatcherTransition() float64 {
	if r.Config.Watchers == 0 {
		return 0
	}
	return r.perTransition(float64(r.WatchBytes)) / float64(r.Config.Watchers)
}

// CPUMsPerTransition is the operator's CPU per transition.
func (r *Run) CPUMsPerTransition() float64 { return r.perTransition(r.OperatorCPUSeconds * 1000) }

// missing lists what a run lacks of the figures it must report (the smoke test's check).
func (r *Run) missing() []string {
	var out []string
	check := func(ok bool, what string) {
		if !ok {
			out = append(out, what)
		}
	}
	check(r.Transitions > 0, "transitions")
	check(r.Config.XDSClients == r.Config.DeltaClients || r.SotwBytes.Bytes > 0, "SotW bytes")
	check(r.Config.DeltaClients == 0 || r.DeltaBytes.Bytes > 0, "delta bytes")
	check(r.AssignmentBytes > 0, "assignment bytes")
	check(r.Config.Watchers == 0 || r.WatchBytes > 0, "store watch bytes")
	check(r.OperatorCPUSeconds > 0, "operator CPU")
	check(r.OperatorPeakRSSMiB > 0, "operator peak RSS")
	for name, k := range map[string]KindTails{"floor": r.Floor, "xDS": r.XDS, "xDS SotW": r.XDSSotw, "xDS delta": r.XDSDelta, "watchers": r.Watchers} {
		if name == "xDS SotW" && r.Config.XDSClients == r.Config.DeltaClients || name == "xDS delta" && r.Config.DeltaClients == 0 ||
			name == "watchers" && r.Config.Watchers == 0 || strings.HasPrefix(name, "xDS") && r.Config.XDSClients == 0 {
			continue
		}
		check(k.Ready.N == r.Ready && k.Ready.Missing == 0 && k.Ready.Max > 0, name+" ready tail")
		check(k.Terminating.N == r.Terminating && k.Terminating.Missing == 0 && k.Terminating.Max > 0, name+" terminating tail")
	}
	return out
}

func (r *Run) line() string {
	return fmt.Sprintf("%d pods, %d transitions in %.1f s: xDS KiB/transition SotW %.1f (%.1f per client), delta %.1f (%.1f per client); "+
		"pushes/client SotW %.1f delta %.1f; store watch KiB/transition %.1f; operator %.2f ms CPU/transition, peak RSS %.0f MiB; "+
		"ready → all xDS p50/p99/max %.0f/%.0f/%.0f ms, → all watchers %.0f/%.0f/%.0f ms (floor p99 %.0f); "+
		"converged xDS %d/%d watchers %d/%d, pending %d, stream errors %d, write errors %d",
		r.Config.Pods, r.Transitions, r.RolloutSeconds, r.SotwBytes.KiBPerTransition(r), r.SotwBytes.KiBPerClientTransition(r),
		r.DeltaBytes.KiBPerTransition(r), r.DeltaBytes.KiBPerClientTransition(r), r.SotwBytes.PushesPerClient(), r.DeltaBytes.PushesPerClient(),
		r.WatchKiBPerTransition(), r.CPUMsPerTransition(), r.OperatorPeakRSSMiB,
		r.XDS.Ready.P50, r.XDS.Ready.P99, r.XDS.Ready.Max, r.Watchers.Ready.P50, r.Watchers.Ready.P99, r.Watchers.Ready.Max, r.Floor.Ready.P99,
		r.XDSConverged, r.Config.XDSClients, r.WatchersConverged, r.Config.Watchers, r.Pending, r.StreamErrors, r.WriteErrors)
}

// stat is the median and range of one figure over the runs.
type stat struct{ median, lo, hi float64 }

func over(runs []*Run, f func(*Run) float64) stat {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return stat{med, v[0], v[len(v)-1]}
}

func (s stat) fmt(decimals int) string {
	if s.lo == s.hi {
		return fmt.Sprintf("%.*f", decimals, s.median)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", decimals, s.median, decimals, s.lo, decimals, s.hi)
}

// tailCell is "p50 / p99 / max" of a tail, each a median (min–max) over the runs in which
// some transition reached every observer; the others have no tail (not a 0 ms one), and the
// cell says how many runs it is over.
func tailCell(runs []*Run, f func(*Run) Tails) string {
	measured := slices.DeleteFunc(slices.Clone(runs), func(r *Run) bool { return f(r).N == 0 })
	if len(measured) == 0 {
		return "– (no transition reached every observer)"
	}
	cell := fmt.Sprintf("%s / %s / %s", over(measured, func(r *Run) float64 { return f(r).P50 }).fmt(0),
		over(measured, func(r *Run) float64 { return f(r).P99 }).fmt(0), over(measured, func(r *Run) float64 { return f(r).Max }).fmt(0))
	if len(measured) < len(runs) {
		cell += fmt.Sprintf(", %d of %d runs", len(measured), len(runs))
	}
	return cell
}

// table is the published table of the runs (one configuration).
func table(runs []*Run) benchfmt.Table {
	c := runs[0].Config
	sotw, delta := c.XDSClients-c.DeltaClients, c.DeltaClients
	t := benchfmt.Table{
		ID: "bench-rollout",
		Title: fmt.Sprintf("A %d-pod service rolling (maxSurge %.0f %%, maxUnavailable 0), %d xDS clients (%d SotW, %d delta), %d pkg/discovery watchers",
			c.Pods, c.SurgePercent, c.XDSClients, sotw, delta, c.Watchers),
		Columns: []string{"", "median (min–max)"},
	}
	row := func(name, v string) { t.Rows = append(t.Rows, []string{name, v}) }
	f := func(get func(*Run) float64, d int) string { return over(runs, get).fmt(d) }
	row("pod transitions (ready + terminating)", f(func(r *Run) float64 { return float64(r.Transitions) }, 0))
	row("rollout: first write → every client and watcher converged, s", f(func(r *Run) float64 { return r.RolloutSeconds }, 1))
	row("ClusterLoadAssignment of every pod (one push), KiB", f(func(r *Run) float64 { return float64(r.AssignmentBytes) / 1024 }, 1))
	row(fmt.Sprintf("**xDS KiB received per transition, all %d SotW clients**", sotw), f(func(r *Run) float64 { return r.SotwBytes.KiBPerTransition(r) }, 1))
	row(fmt.Sprintf("**xDS KiB received per transition, all %d delta clients**", delta), f(func(r *Run) float64 { return r.DeltaBytes.KiBPerTransition(r) }, 1))
	row("xDS KiB per transition per client, SotW / delta", fmt.Sprintf("%s / %s",
		f(func(r *Run) float64 { return r.SotwBytes.KiBPerClientTransition(r) }, 2), f(func(r *Run) float64 { return r.DeltaBytes.KiBPerClientTransition(r) }, 2)))
	row("assignment pushes per client over the rollout, SotW / delta", fmt.Sprintf("%s / %s",
		f(func(r *Run) float64 { return r.SotwBytes.PushesPerClient() }, 1), f(func(r *Run) float64 { return r.DeltaBytes.PushesPerClient() }, 1)))
	row("KiB per push, SotW / delta", fmt.Sprintf("%s / %s",
		f(func(r *Run) float64 { return r.SotwBytes.KiBPerPush() }, 1), f(func(r *Run) float64 { return r.DeltaBytes.KiBPerPush() }, 1)))
	row("xDS MiB over the rollout, every client", f(func(r *Run) float64 { return r.XDSMiB() }, 0))
	row("the same with one push per transition (no coalescing), MiB", f(func(r *Run) float64 { return r.UncoalescedMiB() }, 0))
	row(fmt.Sprintf("store watch KiB received per transition, all %d watchers", c.Watchers), f(func(r *Run) float64 { return r.WatchKiBPerTransition() }, 1))
	row("store watch bytes per transition per watcher", f(func(r *Run) float64 { return r.WatchBytesPerWatcherTransition() }, 0))
	row("**operator CPU ms per transition**", f(func(r *Run) float64 { return r.CPUMsPerTransition() }, 2))
	row("operator peak RSS, MiB", f(func(r *Run) float64 { return r.OperatorPeakRSSMiB }, 0))
	row("CPU s over the rollout: operator / xDS clients and kubelet (bench process) / watchers (their process)", fmt.Sprintf("%s / %s / %s",
		f(func(r *Run) float64 { return r.OperatorCPUSeconds }, 1), f(func(r *Run) float64 { return r.HarnessCPUSeconds }, 1),
		f(func(r *Run) float64 { return r.WatchersCPUSeconds }, 1)))
	row("ready → API watch floor, p50 / p99 / max ms", tailCell(runs, func(r *Run) Tails { return r.Floor.Ready }))
	row("**ready → every xDS client has it HEALTHY**, p50 / p99 / max ms", tailCell(runs, func(r *Run) Tails { return r.XDS.Ready }))
	row("ready → every SotW client / every delta client, p99 ms", fmt.Sprintf("%s / %s",
		f(func(r *Run) float64 { return r.XDSSotw.Ready.P99 }, 0), f(func(r *Run) float64 { return r.XDSDelta.Ready.P99 }, 0)))
	row("**ready → every discovery watcher lists it**, p50 / p99 / max ms", tailCell(runs, func(r *Run) Tails { return r.Watchers.Ready }))
	row("transitions that had not reached every watcher when the run ended, ready / terminating", fmt.Sprintf("%s / %s",
		f(func(r *Run) float64 { return float64(r.Watchers.Ready.Missing) }, 0), f(func(r *Run) float64 { return float64(r.Watchers.Terminating.Missing) }, 0)))
	row("terminating → API watch floor, p50 / p99 / max ms", tailCell(runs, func(r *Run) Tails { return r.Floor.Terminating }))
	row("terminating → every xDS client has it not HEALTHY, p50 / p99 / max ms", tailCell(runs, func(r *Run) Tails { return r.XDS.Terminating }))
	row("terminating → every discovery watcher dropped it, p50 / p99 / max ms", tailCell(runs, func(r *Run) Tails { return r.Watchers.Terminating }))
	row("converged at the end: xDS clients / watchers (of all), stream errors", fmt.Sprintf("%s / %s, %s",
		f(func(r *Run) float64 { return float64(r.XDSConverged) }, 0), f(func(r *Run) float64 { return float64(r.WatchersConverged) }, 0),
		f(func(r *Run) float64 { return float64(r.StreamErrors) }, 0)))
	t.Notes = []string{
		fmt.Sprintf("%d runs; %d pods replaced in steps of %d: the new pods are created, turn ready (the API writes at %g/s), then as many old pods start "+
			"terminating and are deleted %s later; transitions are timed from their API write.",
			len(runs), c.Pods, surgeOf(c.Pods, c.SurgePercent), c.Rate, c.Grace),
		"Bytes are what the clients received (proto.Size of each response, every type; the assignment's pushes dominate) from the first write until every client " +
			"and watcher held the new pods; the final deletions' pushes are in them. Store watch bytes are every gRPC message the watchers' etcd clients received.",
		"The xDS clients and the kubelet's writes run in the bench process, the watchers in a process of their own, " +
			"on the same cores as the operator, the API server and both etcd servers.",
		"A tail is over the transitions that reached every observer of its set: one watcher that never caught up (the run ends 2 minutes after the last " +
			"write) takes every later transition out of the watchers' tail, so a run can have none; such runs are left out of the cell, which then says " +
			"how many runs it is over.",
	}
	return t
}
