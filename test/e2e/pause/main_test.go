package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestExitsOnSignal builds the binary, starts it, and checks that SIGTERM and SIGINT end it
// with status 0.
func TestExitsOnSignal(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The first line is written once the handlers are installed.
		if _, err := bufio.NewReader(stderr).ReadString('\n'); err != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("reading the start line: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%v: exit %v, want status 0", sig, err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("%v: still running 10s after the signal", sig)
		}
	}
}

// TestReap checks that reap collects an exited child that nobody else waits for.
func TestReap(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for reap() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("child not reaped within 10s")
		}
		time.Sleep(10 * time.Millisecond) // the child exits on its own schedule
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err != syscall.ESRCH {
		t.Errorf("child %d still exists after reap: kill(0) = %v", cmd.Process.Pid, err)
	}
}

// TestWaitReturnsOnTermOrInt checks that SIGCHLD keeps wait going and SIGTERM/SIGINT end it.
func TestWaitReturnsOnTermOrInt(t *testing.T) {
	for _, last := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		sigs := make(chan os.Signal, 3)
		sigs <- syscall.SIGCHLD
		sigs <- syscall.SIGCHLD
		sigs <- last
		wait(sigs)
		if len(sigs) != 0 {
			t.Errorf("%v: %d signals left unread", last, len(sigs))
		}
	}
}
