package ctl

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/registrar-dev/registrar/internal/ctl/breakers"
	"github.com/registrar-dev/registrar/pkg/discovery"
)

// breakers prints the coordinated breakers of every service, or of SERVICE: the fleet's
// shared state, the caller holding the half-open probe permit, and the callers whose own
// breaker tripped and reported (the votes toward the quorum). Per-instance breakers live
// in each caller's memory, not in the store: see the callers' metrics for those.
func (r *runner) breakers(ctx context.Context, args []string) int {
	service := ""
	if len(args) == 1 {
		service = args[0]
		if strings.Contains(service, "/") {
			return r.fail(ExitUsage, "breakers takes a service name, not %q", service)
		}
	}
	cli, err := r.connect()
	if err != nil {
		return r.fail(ExitError, "%v", err)
	}
	defer func() { _ = cli.Close() }()
	prefix := discovery.BreakerPrefix(r.opts.prefix, service)
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		code := storeCode(err)
		if code == ExitUnreachable {
			return r.fail(code, "store %s unreachable: %v", r.opts.endpoints, err)
		}
		return r.fail(code, "list %s: %v", prefix, err)
	}
	all := discovery.BreakerPrefix(r.opts.prefix, "")
	views := breakers.Read(resp.Kvs, all, func(key []byte, err error) {
		fmt.Fprintf(r.env.Stderr, "registrarctl: skipping %s: %v\n", key, err)
	})
	if err := breakers.Print(r.out(), views, r.env.Now()); err != nil {
		return r.fail(ExitError, "%v", err)
	}
	if service != "" && len(views) == 0 {
		return r.fail(ExitNotFound, "no coordinated breaker for %q under %s", service, r.opts.prefix)
	}
	return ExitOK
}
