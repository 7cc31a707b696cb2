package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/registrar-dev/registrar/test/support/proc"
)

// process is a child process of the harness (test/support/proc) whose resources are
// measured through /proc.
type process = proc.Process

// startProcess runs bin with args, its output going to dir/name.log.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	return proc.Start(proc.Config{Name: name, Bin: bin, Args: args, LogPath: filepath.Join(dir, name+".log")})
}

// Usage is what a process used, read from /proc.
type Usage struct {
	// PeakRSSMiB is VmHWM: the largest resident set the process ever had.
	PeakRSSMiB float64 `json:"peakRssMiB"`
	// RSSMiB is VmRSS when read.
	RSSMiB float64 `json:"rssMiB"`
	// FileRSSMiB is RssFile when read: the resident pages mapped from files, nearly all the
	// executable's code and read-only data it has touched (shared page cache, reclaimable).
	// It varies by several MiB between runs of one binary (the kernel maps the cached pages
	// around each fault), and it is part of PeakRSSMiB: PeakRSSMiB − FileRSSMiB approximates
	// the process's own (anonymous) peak.
	FileRSSMiB float64 `json:"fileRssMiB,omitempty"`
	// CPUSeconds is user plus system time since the process started.
	CPUSeconds float64 `json:"cpuSeconds"`
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// readUsage reads /proc/pid/status and /proc/pid/stat.
func readUsage(pid int) (Usage, error) {
	var u Usage
	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read status of %d: %w", pid, err)
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmHWM:":
			u.PeakRSSMiB = kb / 1024
		case "VmRSS:":
			u.RSSMiB = kb / 1024
		case "RssFile:":
			u.FileRSSMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	u.CPUSeconds, err = parseCPUSeconds(string(stat))
	return u, err
}

// parseCPUSeconds reads utime and stime (fields 14 and 15) from /proc/pid/stat; the command
// name (field 2, in parentheses) may contain spaces, so fields count from its closing one.
func parseCPUSeconds(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	fields := strings.Fields(stat[i+1:]) // fields[0] is field 3 (state)
	if len(fields) < 13 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed stat times %q %q", fields[11], fields[12])
	}
	return (utime + stime) / clockTicks, nil
}
