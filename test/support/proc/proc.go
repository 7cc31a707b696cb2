// Package proc runs real processes for tests and harnesses, registrar itself among them
// (BuildRegistrar): output to a log file, killed with the test binary (Pdeathsig), stopped,
// killed, signalled and restarted with the same arguments.
package proc

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config says how to start a process.
type Config struct {
	// Name names the process in errors and log headers.
	Name string
	// Bin and Args are the command.
	Bin  string
	Args []string
	// LogPath receives stdout and stderr, appended (a restart adds to it).
	LogPath string
	// Env, when set, replaces the environment.
	Env []string
}

// Process is one running (or exited) process of a Config.
type Process struct {
	cfg Config

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts the process and returns at once.
func Start(cfg Config) (*Process, error) {
	p := &Process{cfg: cfg}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Process) start() error {
	if err := os.MkdirAll(filepath.Dir(p.cfg.LogPath), 0o755); err != nil {
		return fmt.Errorf("log dir of %s: %w", p.cfg.Name, err)
	}
	logf, err := os.OpenFile(p.cfg.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("log of %s: %w", p.cfg.Name, err)
	}
	fmt.Fprintf(logf, "=== start %s at %s\n", p.cfg.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.cfg.Bin, p.cfg.Args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = logf, logf, p.cfg.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", p.cfg.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	return nil
}

func (p *Process) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

// Name is the Config's name; LogPath its log file.
func (p *Process) Name() string    { return p.cfg.Name }
func (p *Process) LogPath() string { return p.cfg.LogPath }

// Pid is the process id of the current run.
func (p *Process) Pid() int {
	cmd, _ := p.current()
	return cmd.Process.Pid
}

// Exited is nil while the process runs, and says how it ended once it has exited.
func (p *Process) Exited() error {
	cmd, exited := p.current()
	select {
	case <-exited:
		return fmt.Errorf("%s exited (%v); see %s", p.cfg.Name, cmd.ProcessState, p.cfg.LogPath)
	default:
		return nil
	}
}

// WaitExit waits up to d for the process to exit on its own.
func (p *Process) WaitExit(d time.Duration) bool {
	_, exited := p.current()
	select {
	case <-exited:
		return true
	case <-time.After(d):
		return false
	}
}

// Signal sends sig.
func (p *Process) Signal(sig syscall.Signal) error {
	cmd, _ := p.current()
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to %s: %w", sig, p.cfg.Name, err)
	}
	return nil
}

// Kill sends SIGKILL (and SIGCONT, in case it is stopped) and waits for the exit.
func (p *Process) Kill() {
	cmd, exited := p.current()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	<-exited
}

// Stop sends SIGTERM and kills the process after grace.
func (p *Process) Stop(grace time.Duration) {
	cmd, exited := p.current()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		p.Kill()
	}
}

// Resume starts the process again with the same Config once it has exited (after Kill); it
// does nothing while the process runs.
func (p *Process) Resume() error {
	if p.Exited() == nil {
		return nil
	}
	return p.start()
}

// Restart kills the process and starts it again with the same Config.
func (p *Process) Restart() error {
	p.Kill()
	return p.start()
}

// WaitHTTP polls url until it answers 200, the process exits or ctx ends.
func (p *Process) WaitHTTP(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if err := p.Exited(); err != nil {
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
			return fmt.Errorf("%s not ready at %s: %w", p.cfg.Name, url, ctx.Err())
		case <-time.After(100 * time.Millisecond): // polling a starting process
		}
	}
}

// LogContains reports whether the log holds s.
func (p *Process) LogContains(s string) bool {
	b, _ := os.ReadFile(p.cfg.LogPath)
	return strings.Contains(string(b), s)
}

// LogTail is the last n lines of the log.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.cfg.LogPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-n):], "\n")
}

// RepoRoot is the directory of registrar's go.mod, found upwards from the working directory
// (a test's package directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/registrar-dev/registrar\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no registrar go.mod above the working directory")
		}
		dir = parent
	}
}

// BuildRegistrar builds the operator (./cmd) into dir and returns the binary's path.
func BuildRegistrar(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "registrar")
	build := exec.Command("go", "build", "-o", bin, "./cmd")
	build.Dir = root
	// Without cgo, as make build and the image build it (and so from the same build cache, even
	// when the test itself runs with -race and CGO_ENABLED=1).
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build registrar: %w\n%s", err, out)
	}
	return bin, nil
}
