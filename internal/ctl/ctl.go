// Package ctl is registrarctl: a terminal view of the registry the registrar operator keeps
// (list, get and watch instances; read the operator's detection-lag metrics). The binary in
// cmd/registrarctl only calls Run, so every command is testable here.
package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Exit codes of registrarctl; scripts can rely on them.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitError: anything else went wrong (bad TLS files, a store error other than
	// unreachable, undecodable output).
	ExitError = 1
	// ExitUsage: unknown command or flag, missing or malformed arguments.
	ExitUsage = 2
	// ExitNotFound: get found no such instance; list SERVICE found no instance; lag found no
	// registrar metrics at the URL; breakers SERVICE found no coordinated breaker.
	ExitNotFound = 3
	// ExitUnreachable: the store (for lag: the metrics endpoint) did not answer in time.
	ExitUnreachable = 4
)

// Env is what a run reads and writes besides its arguments.
type Env struct {
	Stdout, Stderr io.Writer
	// Getenv reads the REGISTRAR_* defaults of the flags (os.Getenv when nil).
	Getenv func(string) string
	// Now is the clock of AGE columns and watch timestamps (time.Now when nil).
	Now func() time.Time
}

// options are the flags common to every command.
type options struct {
	endpoints                 string
	prefix                    string
	timeout                   time.Duration
	caFile, certFile, keyFile string
	metricsURL                string
	output                    string
}

const usage = `registrarctl: inspect the registry that the registrar operator keeps in etcd.

Usage:
  registrarctl [flags] list [SERVICE]          instances of every service, or of SERVICE
  registrarctl [flags] get SERVICE/[NAMESPACE/]POD
  registrarctl [flags] watch SERVICE           live adds and removes, with timestamps (Ctrl-C ends)
  registrarctl [flags] lag                     detection-lag percentiles from the operator's metrics
  registrarctl [flags] breakers [SERVICE]      the callers' coordinated circuit breakers: state, probe, reports

Flags (anywhere on the line; each defaults to the environment variable shown):
`

const exitCodes = `
Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 store (lag: metrics endpoint) unreachable.
`

// Run runs registrarctl with args (without the program name) and returns its exit code.
func Run(ctx context.Context, args []string, env Env) int {
	env = env.withDefaults()
	opts, pos, err := parse(args, env)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "registrarctl: %v (see registrarctl -h)\n", err)
		return ExitUsage
	}
	if len(pos) == 0 {
		fmt.Fprintln(env.Stderr, "registrarctl: a command is required: list, get, watch, lag or breakers (see registrarctl -h)")
		return ExitUsage
	}
	cmd, rest := pos[0], pos[1:]
	r := &runner{opts: opts, env: env}
	switch {
	case cmd == "list" && len(rest) <= 1:
		return r.list(ctx, rest)
	case cmd == "get" && len(rest) == 1:
		return r.get(ctx, rest[0])
	case cmd == "watch" && len(rest) == 1:
		return r.watch(ctx, rest[0])
	case cmd == "lag" && len(rest) == 0:
		return r.lag(ctx)
	case cmd == "breakers" && len(rest) <= 1:
		return r.breakers(ctx, rest)
	case cmd == "list" || cmd == "get" || cmd == "watch" || cmd == "lag" || cmd == "breakers":
		fmt.Fprintf(env.Stderr, "registrarctl: wrong arguments for %s: %q (see registrarctl -h)\n", cmd, rest)
	default:
		fmt.Fprintf(env.Stderr, "registrarctl: unknown command %q (see registrarctl -h)\n", cmd)
	}
	return ExitUsage
}

func (e Env) withDefaults() Env {
	if e.Stdout == nil {
		e.Stdout = os.Stdout
	}
	if e.Stderr == nil {
		e.Stderr = os.Stderr
	}
	if e.Getenv == nil {
		e.Getenv = os.Getenv
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	return e
}

// parse reads the flags, which may come before, between or after the positional
// arguments, and returns the positional ones.
func parse(args []string, env Env) (options, []string, error) {
	var o options
	fs := flag.NewFlagSet("registrarctl", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	envOr := func(key, def string) string {
		if v := env.Getenv(key); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&o.endpoints, "store-endpoints", envOr("REGISTRAR_STORE_ENDPOINTS", "http://127.0.0.1:2379"), "comma-separated etcd client URLs ($REGISTRAR_STORE_ENDPOINTS)")
	fs.StringVar(&o.prefix, "store-prefix", envOr("REGISTRAR_STORE_PREFIX", "/registrar/services"), "key prefix of every endpoint ($REGISTRAR_STORE_PREFIX)")
	timeout := fs.String("store-timeout", envOr("REGISTRAR_STORE_TIMEOUT", "5s"), "timeout of every store call ($REGISTRAR_STORE_TIMEOUT)")
	fs.StringVar(&o.caFile, "store-ca-file", envOr("REGISTRAR_STORE_CA_FILE", ""), "CA bundle of the store's TLS certificate ($REGISTRAR_STORE_CA_FILE)")
	fs.StringVar(&o.certFile, "store-cert-file", envOr("REGISTRAR_STORE_CERT_FILE", ""), "client certificate for the store ($REGISTRAR_STORE_CERT_FILE)")
	fs.StringVar(&o.keyFile, "store-key-file", envOr("REGISTRAR_STORE_KEY_FILE", ""), "client key for the store ($REGISTRAR_STORE_KEY_FILE)")
	fs.StringVar(&o.metricsURL, "metrics-url", envOr("REGISTRAR_METRICS_URL", "http://127.0.0.1:8080/metrics"), "the operator's metrics endpoint, for lag ($REGISTRAR_METRICS_URL)")
	fs.StringVar(&o.output, "o", "", "output format: wide, json or yaml (default: a table)")
	fs.StringVar(&o.output, "output", "", "same as -o")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), exitCodes)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return o, nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	var err error
	if o.timeout, err = time.ParseDuration(*timeout); err != nil || o.timeout <= 0 {
		return o, nil, fmt.Errorf("--store-timeout %q: want a positive duration such as 5s", *timeout)
	}
	switch o.output {
	case "", "wide", "json", "yaml":
	default:
		return o, nil, fmt.Errorf("-o %q: want wide, json or yaml", o.output)
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return o, nil, errors.New("--store-cert-file and --store-key-file go together")
	}
	if strings.TrimSpace(o.endpoints) == "" {
		return o, nil, errors.New("--store-endpoints is empty")
	}
	return o, pos, nil
}

// runner runs one command.
type runner struct {
	opts options
	env  Env
}

// fail prints err and returns code.
func (r *runner) fail(code int, format string, args ...any) int {
	fmt.Fprintf(r.env.Stderr, "registrarctl: "+format+"\n", args...)
	return code
}
