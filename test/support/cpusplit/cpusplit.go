// Package cpusplit splits the CPU a machine used during a measurement between a process
// tree's groups (e.g. the operator, the API server, the clients) and everything else (other
// users of a shared machine), from /proc: Read takes a sample, Split compares two.
package cpusplit

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// Proc is one process of the tree when sampled.
type Proc struct {
	PID     int
	Comm    string
	Cmdline string  // arguments joined by spaces
	CPU     float64 // user + system seconds since it started
}

// Sample is the machine's busy CPU seconds since boot and the processes of a tree.
type Sample struct {
	At          time.Time
	MachineBusy float64 // all cores, not idle and not waiting for I/O
	Procs       map[int]Proc
}

// Read samples the machine and the tree rooted at root (root and its descendants).
func Read(root int) (Sample, error) {
	s := Sample{At: time.Now(), Procs: map[int]Proc{}}
	busy, err := machineBusy()
	if err != nil {
		return s, err
	}
	s.MachineBusy = busy
	parents := map[int]int{}
	procs := map[int]Proc{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // exited
		}
		p, ppid, err := parseStat(string(data))
		if err != nil {
			continue
		}
		parents[p.PID], procs[p.PID] = ppid, p
	}
	for pid, p := range procs {
		if !descends(pid, root, parents) {
			continue
		}
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			p.Cmdline = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		}
		s.Procs[pid] = p
	}
	return s, nil
}

func descends(pid, root int, parents map[int]int) bool {
	for range 64 { // depth bound: a cycle cannot happen, a deep tree is not ours
		if pid == root {
			return true
		}
		ppid, ok := parents[pid]
		if !ok || ppid <= 1 {
			return false
		}
		pid = ppid
	}
	return false
}

// Split is the CPU each group of the tree used between two samples, and what the rest of
// the machine used, in cores (CPU seconds per second of wall time). group names a process's
// group; processes in no group ("") count as the rest. A process that exited between the
// samples is missing from the tree's count (and so counts as the rest).
func Split(before, after Sample, group func(Proc) string) (groups map[string]float64, other float64) {
	wall := after.At.Sub(before.At).Seconds()
	groups = map[string]float64{}
	if wall <= 0 {
		return groups, 0
	}
	var tree float64
	for pid, p := range after.Procs {
		g := group(p)
		if g == "" {
			continue
		}
		used := p.CPU
		if b, ok := before.Procs[pid]; ok {
			used -= b.CPU
		}
		groups[g] += used / wall
		tree += used
	}
	other = max((after.MachineBusy-before.MachineBusy-tree)/wall, 0)
	return groups, other
}

// machineBusy is the CPU time all cores spent busy since boot, from /proc/stat.
func machineBusy() (float64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("read /proc/stat: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("empty /proc/stat")
	}
	return parseMachineBusy(sc.Text())
}

// parseMachineBusy sums the first line of /proc/stat but idle and iowait (guest time is
// already in user).
func parseMachineBusy(line string) (float64, error) {
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, fmt.Errorf("malformed /proc/stat %q", line)
	}
	var total float64
	for i, v := range fields[1:] {
		if i >= 8 {
			break
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc/stat %q: %w", line, err)
		}
		if i == 3 || i == 4 {
			continue
		}
		total += n
	}
	return total / clockTicks, nil
}

// parseStat reads pid, comm, ppid and utime+stime from /proc/pid/stat; comm may contain
// spaces and parentheses, so fields count from its last ')'.
func parseStat(stat string) (Proc, int, error) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return Proc{}, 0, fmt.Errorf("malformed stat %q", stat)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(stat[:open]))
	if err != nil {
		return Proc{}, 0, fmt.Errorf("malformed stat pid %q", stat[:open])
	}
	f := strings.Fields(stat[end+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return Proc{}, 0, fmt.Errorf("malformed stat %q", stat)
	}
	ppid, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseFloat(f[11], 64)
	stime, err3 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Proc{}, 0, fmt.Errorf("malformed stat %q", stat)
	}
	return Proc{PID: pid, Comm: stat[open+1 : end], CPU: (utime + stime) / clockTicks}, ppid, nil
}
