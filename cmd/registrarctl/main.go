// Command registrarctl inspects the registry the registrar operator keeps in etcd: list, get
// and watch the instances of a service, and read the operator's detection-lag metrics. See
// `registrarctl -h`; the commands live in internal/ctl.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/registrar-dev/registrar/internal/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Run(ctx, os.Args[1:], ctl.Env{})
	stop()
	os.Exit(code)
}
