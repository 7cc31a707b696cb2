// Command registrarctl inspects the registry the registrar operator keeps in etcd: list, get
// and watch the instances of a service, read the operator's detection-lag metrics and the
// callers' coordinated breakers. Installed as kubectl-registrar it is the kubectl plugin
// `kubectl registrar`. See `registrarctl --help`; the commands live in internal/ctl.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/registrar-dev/registrar/internal/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := ctl.Env{}
	if strings.HasPrefix(filepath.Base(os.Args[0]), ctl.PluginName) {
		env.Name = ctl.PluginName
	}
	code := ctl.Run(ctx, os.Args[1:], env)
	stop()
	os.Exit(code)
}
