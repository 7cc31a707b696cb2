package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// machineBusySeconds is the CPU time all cores spent busy (not idle, not waiting for I/O)
// since boot, from /proc/stat.
func machineBusySeconds() (float64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("empty /proc/stat")
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, fmt.Errorf("malformed /proc/stat %q", sc.Text())
	}
	var total float64
	for i, v := range fields[1:] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc/stat %q", sc.Text())
		}
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += n
	}
	return total / clockTicks, nil
}

// treeCPUSeconds is the CPU time of this process and each of its children (kube-apiserver,
// the etcds, the operator, kube-controller-manager, the watcher process), by command name.
func treeCPUSeconds() map[string]float64 {
	out := map[string]float64{}
	self := os.Getpid()
	if u, err := readUsage(self); err == nil {
		out["harness"] = u.CPUSeconds
	}
	selfComm := ""
	if data, err := os.ReadFile("/proc/self/comm"); err == nil {
		selfComm = strings.TrimSpace(string(data))
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(data)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		rest := strings.Fields(s[close+1:])
		if len(rest) < 2 || rest[1] != strconv.Itoa(self) {
			continue
		}
		cpu, err := parseCPUSeconds(s)
		if err != nil {
			continue
		}
		name := s[open+1 : close]
		if name == selfComm {
			name = "watcher" // the bench command re-executed as the watcher process
		}
		out[name] += cpu
	}
	return out
}
