// Package benchfmt is the envelope every published measurement is committed in
// (docs/bench/*.json): kind, date, commit, command, the machine and its load average before
// and after, the raw runs, and the tables bench/benchdoc renders into the docs. The bench
// harness (bench/controlplane), bench/e2e (the e2e comparison) and bench/benchdoc share these
// types, so the files they write and read have one shape. See docs/performance.md.
package benchfmt

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Envelope is one published measurement; R is the type of its raw runs (json.RawMessage
// for a reader that keeps them as they are).
type Envelope[R any] struct {
	Kind    string  `json:"kind"`
	Date    string  `json:"date"` // RFC 3339, UTC
	Commit  string  `json:"commit"`
	Command string  `json:"command"` // the exact make command
	Machine Machine `json:"machine"`
	Runs    []R     `json:"runs"`
	Tables  []Table `json:"tables"`
}

// Machine are the facts of the machine a measurement ran on, with its load average (1, 5
// and 15 minutes) before and after: the machine is shared, so a figure is only as quiet as
// its load says.
type Machine struct {
	Cores      int        `json:"cores"`
	CPUModel   string     `json:"cpu_model"`
	MemGiB     float64    `json:"mem_gib"`
	LoadBefore [3]float64 `json:"load_before"`
	LoadAfter  [3]float64 `json:"load_after"`
}

// Table is one rendered table: bench/benchdoc replaces the text between
// <!-- bench:<ID> --> and <!-- /bench:<ID> --> in the docs with it.
type Table struct {
	ID      string     `json:"id"`
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	Notes   []string   `json:"notes,omitempty"`
}

// MachineFacts reads cores, CPU model and memory (the load fields are left to the caller).
func MachineFacts() Machine {
	m := Machine{Cores: runtime.NumCPU()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemGiB = float64(int(kb/1024/1024*10+0.5)) / 10
			}
		}
	}
	return m
}

// LoadAvg reads /proc/loadavg (zeros when it cannot).
func LoadAvg() [3]float64 {
	var l [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(data))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// Load3 is a load average read as a slice (the e2e runs record it so) as the envelope's
// three values; missing values are 0.
func Load3(l []float64) [3]float64 {
	var out [3]float64
	copy(out[:], l)
	return out
}
