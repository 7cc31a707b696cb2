// Command pause is the sandbox ("pause") container of the end-to-end cluster: it sleeps until
// SIGTERM or SIGINT and reaps zombie children on SIGCHLD. Build it static (CGO_ENABLED=0).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	fmt.Fprintln(os.Stderr, "pause: waiting for SIGTERM or SIGINT")
	wait(sigs)
}

// wait returns on the first SIGTERM or SIGINT from sigs, and reaps children on each SIGCHLD.
func wait(sigs <-chan os.Signal) {
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap waits for every child that has exited, without blocking, and returns how many it
// reaped. Signals coalesce, so one SIGCHLD may stand for several children.
func reap() int {
	n := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return n
		}
		n++
	}
}
