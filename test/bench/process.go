package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a child process of the harness whose resources are measured through /proc.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
}

// startProcess runs bin with args, its output going to dir/name.log.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the harness
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{}), log: f}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Pid is the process id.
func (p *process) Pid() int { return p.cmd.Process.Pid }

// running reports an error when the process has exited.
func (p *process) running() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); see %s", p.name, p.cmd.ProcessState, p.log.Name())
	default:
		return nil
	}
}

// stop sends SIGTERM and kills the process after grace.
func (p *process) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	_ = p.log.Close()
}

// waitHTTP polls url until it answers 200, the process exits or ctx ends.
func (p *process) waitHTTP(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if err := p.running(); err != nil {
			return err
		}
		if resp, err := client.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w", p.name, url, ctx.Err())
		case <-time.After(100 * time.Millisecond): // polling a starting process
		}
	}
}

// Usage is what a process used, read from /proc.
type Usage struct {
	// PeakRSSMiB is VmHWM: the largest resident set the process ever had.
	PeakRSSMiB float64 `json:"peakRssMiB"`
	// RSSMiB is VmRSS when read.
	RSSMiB float64 `json:"rssMiB"`
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

// freeAddr returns a loopback address with a port nobody listens on right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
