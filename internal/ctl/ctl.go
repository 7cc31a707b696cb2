// Package ctl is registrarctl: a terminal view of the registry the registrar operator keeps
// (list, get and watch instances; the clusters publishing into the store; the operator's
// health and detection-lag metrics; the callers' coordinated breakers). It owns the cobra
// command tree with its flags and shell completion, the store connection, and the exit
// codes; how each -o format prints is internal/ctl/output's, the lag percentiles
// internal/ctl/lagstats', the breakers' views internal/ctl/breakers'. The binary in
// cmd/registrarctl (also installed as the kubectl plugin kubectl-registrar) only calls Run,
// so every command is testable here.
package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/util/jsonpath"

	"github.com/registrar-dev/registrar/internal/ctl/output"
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

// DefaultName is the program name in help and completion scripts.
const DefaultName = "registrarctl"

// PluginName is the name of the same binary as a kubectl plugin (kubectl registrar ...).
const PluginName = "kubectl-registrar"

// Env is what a run reads and writes besides its arguments.
type Env struct {
	Stdout, Stderr io.Writer
	// Getenv reads the REGISTRAR_* defaults of the flags (os.Getenv when nil).
	Getenv func(string) string
	// Now is the clock of AGE columns and watch timestamps (time.Now when nil).
	Now func() time.Time
	// Name is the program name: DefaultName when empty, or PluginName when the binary runs
	// as a kubectl plugin (help then says "kubectl registrar").
	Name string
}

// options are the flags common to every command.
type options struct {
	endpoints                 string
	prefix                    string
	timeoutText               string
	timeout                   time.Duration
	caFile, certFile, keyFile string
	metricsURL                string
	output                    string
	// cluster filters list to one cluster's instances (--cluster).
	cluster string
	// namespace scopes list and watch to the instances registered from one Kubernetes
	// namespace (-n/--namespace): {prefix}/{service}/{namespace}/.
	namespace string
	// jsonPath is the parsed template of -o jsonpath=...; output is then "jsonpath".
	jsonPath *jsonpath.JSONPath
}

const exitCodes = `Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 store (lag: metrics endpoint) unreachable.`

// codeError carries an exit code whose message has been printed already.
type codeError struct{ code int }

func (e codeError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Run runs registrarctl with args (without the program name) and returns its exit code.
func Run(ctx context.Context, args []string, env Env) int {
	env = env.withDefaults()
	root := NewCommand(env)
	root.SetArgs(normalizeArgs(root, args))
	err := root.ExecuteContext(ctx)
	var ce codeError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ce):
		return ce.code
	}
	fmt.Fprintf(env.Stderr, "%s: %v (see %s --help)\n", env.display(), err, env.display())
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
	if e.Name == "" {
		e.Name = DefaultName
	}
	return e
}

// display is how the program is invoked: "registrarctl" or "kubectl registrar".
func (e Env) display() string {
	if name, ok := strings.CutPrefix(e.Name, "kubectl-"); ok {
		return "kubectl " + name
	}
	return e.Name
}

// NewCommand returns the registrarctl command tree. Its flags default to the REGISTRAR_*
// variables of env; Run executes it and maps its errors to exit codes.
func NewCommand(env Env) *cobra.Command {
	env = env.withDefaults()
	r := &runner{env: env}
	o := &r.opts
	name := env.display()
	root := &cobra.Command{
		Use:   env.Name,
		Short: "Inspect the registry that the registrar operator keeps in etcd",
		Long: `Inspect the registry that the registrar operator keeps in etcd: the instances of each
service, live changes, the operator's detection lag and the callers' coordinated breakers.

Every flag may come before or after the command and defaults to the environment variable
named in its help.

` + exitCodes,
		Example: strings.ReplaceAll(`  # every instance of every service, with node, zone and revision
  NAME list -o wide
  # the addresses of one service's instances
  NAME list orders -o jsonpath='{[*].address}'
  # only the instances the shop namespace registered for orders
  NAME list orders -n shop
  # live adds and removes (Ctrl-C ends)
  NAME watch orders --store-endpoints https://etcd:2379 --store-ca-file ca.pem
  # shell completion
  source <(NAME completion bash)`, "NAME", name),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Only reached without a command: unknown commands are rejected by cobra first.
		RunE: func(*cobra.Command, []string) error {
			return errors.New("a command is required: list, get, watch, clusters, lag, breakers or health")
		},
	}
	if name != env.Name {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: name}
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.CompletionOptions.HiddenDefaultCmd = false

	envOr := func(key, def string) string {
		if v := env.Getenv(key); v != "" {
			return v
		}
		return def
	}
	pf := root.PersistentFlags()
	pf.StringVar(&o.endpoints, "store-endpoints", envOr("REGISTRAR_STORE_ENDPOINTS", "http://127.0.0.1:2379"), "comma-separated etcd client URLs ($REGISTRAR_STORE_ENDPOINTS)")
	pf.StringVar(&o.prefix, "store-prefix", envOr("REGISTRAR_STORE_PREFIX", "/registrar/services"), "key prefix of every endpoint ($REGISTRAR_STORE_PREFIX)")
	pf.StringVar(&o.timeoutText, "store-timeout", envOr("REGISTRAR_STORE_TIMEOUT", "5s"), "timeout of every store call ($REGISTRAR_STORE_TIMEOUT)")
	pf.StringVar(&o.caFile, "store-ca-file", envOr("REGISTRAR_STORE_CA_FILE", ""), "CA bundle of the store's TLS certificate ($REGISTRAR_STORE_CA_FILE)")
	pf.StringVar(&o.certFile, "store-cert-file", envOr("REGISTRAR_STORE_CERT_FILE", ""), "client certificate for the store ($REGISTRAR_STORE_CERT_FILE)")
	pf.StringVar(&o.keyFile, "store-key-file", envOr("REGISTRAR_STORE_KEY_FILE", ""), "client key for the store ($REGISTRAR_STORE_KEY_FILE)")
	pf.StringVar(&o.metricsURL, "metrics-url", envOr("REGISTRAR_METRICS_URL", "http://127.0.0.1:8080/metrics"), "the operator's metrics endpoint, for lag ($REGISTRAR_METRICS_URL)")
	pf.StringVarP(&o.output, "output", "o", "", "output format: wide, json, yaml or jsonpath=TEMPLATE (default: a table)")
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return output.Formats, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	for _, f := range []string{"store-ca-file", "store-cert-file", "store-key-file"} {
		_ = root.MarkPersistentFlagFilename(f)
	}

	// run wraps a command: validate the flags, run, map the exit code.
	run := func(f func(ctx context.Context, args []string) int) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if err := r.validate(); err != nil {
				return err
			}
			if code := f(cmd.Context(), args); code != ExitOK {
				return codeError{code}
			}
			return nil
		}
	}
	root.AddCommand(
		&cobra.Command{
			Use:               "list [SERVICE]",
			Short:             "List the instances of every service, or of SERVICE",
			Long:              "List the instances of every service, or of SERVICE (exit 3 when SERVICE has none).",
			Example:           "  " + name + " list\n  " + name + " list orders -o wide",
			Args:              argsRange(0, 1),
			ValidArgsFunction: r.completeServices,
			RunE:              run(r.list),
		},
		&cobra.Command{
			Use:   "get SERVICE/[NAMESPACE/]POD",
			Short: "Show one instance",
			Long: "Show one instance: SERVICE/NAMESPACE/POD, or SERVICE/POD when the pod name is unique across\n" +
				"namespaces (exit 3 when there is no such instance).",
			Example:           "  " + name + " get orders/shop/orders-a -o yaml",
			Args:              argsRange(1, 1),
			ValidArgsFunction: r.completeInstances,
			RunE: run(func(ctx context.Context, args []string) int {
				return r.get(ctx, args[0])
			}),
		},
		&cobra.Command{
			Use:   "watch SERVICE",
			Short: "Print live adds, updates and removes of SERVICE's instances, with timestamps (Ctrl-C ends)",
			Long: "Print SERVICE's instances as ADDED, then every change as it is pushed, until interrupted (exit 0).\n" +
				"Exit 4 when the first list does not succeed within --store-timeout; later outages are\n" +
				"printed as DISCONNECTED and RECONNECTED events.",
			Args:              argsRange(1, 1),
			ValidArgsFunction: r.completeServices,
			RunE: run(func(ctx context.Context, args []string) int {
				return r.watch(ctx, args[0])
			}),
		},
		&cobra.Command{
			Use:   "clusters [SERVICE]",
			Short: "The clusters publishing into the store: instances, write fence holder, endpoint lease",
			Long: "Show every cluster whose registrar publishes into the store (or publishes SERVICE): its\n" +
				"instances and services, and in a store shared by several clusters (--store-shared) the\n" +
				"installation holding its write fence and what is left of its endpoint lease (expired: its\n" +
				"registrar is gone and its records age out). list --cluster NAME lists one cluster's instances.",
			Example:           "  " + name + " clusters\n  " + name + " clusters orders -o json",
			Args:              argsRange(0, 1),
			ValidArgsFunction: r.completeServices,
			RunE:              run(r.clusters),
		},
		&cobra.Command{
			Use:   "lag",
			Short: "Detection-lag percentiles from the operator's metrics",
			Long: "Read the operator's metrics endpoint (--metrics-url) and print the registration and\n" +
				"deregistration lag percentiles (exit 3 when the endpoint has no registrar histograms).",
			Args: argsRange(0, 0),
			RunE: run(func(ctx context.Context, _ []string) int { return r.lag(ctx) }),
		},
		&cobra.Command{
			Use:   "breakers [SERVICE]",
			Short: "The callers' coordinated circuit breakers: state, probe, reports",
			Long: "Show the coordinated breakers of every service, or of SERVICE: the fleet's shared state, the\n" +
				"caller holding the half-open probe permit, and the callers that reported their own breaker\n" +
				"tripped (exit 3 when SERVICE has no coordinated breaker).",
			Args:              argsRange(0, 1),
			ValidArgsFunction: r.completeServices,
			RunE:              run(r.breakers),
		},
		healthCommand(r, run),
	)
	if list, _, err := root.Find([]string{"list"}); err == nil {
		list.Flags().StringVar(&o.cluster, "cluster", "", "only the instances of this cluster (their cluster field; see the clusters command)")
		list.Flags().StringVarP(&o.namespace, "namespace", "n", "", "only the instances registered from this Kubernetes namespace")
	}
	if watch, _, err := root.Find([]string{"watch"}); err == nil {
		watch.Flags().StringVarP(&o.namespace, "namespace", "n", "", "only the instances registered from this Kubernetes namespace")
	}
	return root
}

// argsRange accepts between lo and hi positional arguments.
func argsRange(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return fmt.Errorf("wrong arguments for %s: %q", cmd.Name(), args)
		}
		return nil
	}
}

// normalizeArgs keeps the single-dash long flags of the Go flag package that registrarctl
// used before cobra (-store-endpoints=..., -output json, -help) working: it adds the
// second dash to any -NAME whose NAME is a long flag.
func normalizeArgs(root *cobra.Command, args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") || len(a) <= 2 {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if name == "help" || root.PersistentFlags().Lookup(name) != nil {
			out[i] = "-" + a
		}
	}
	return out
}

// validate checks the flags and parses --store-timeout and -o.
func (r *runner) validate() error {
	o := &r.opts
	var err error
	if o.timeout, err = time.ParseDuration(o.timeoutText); err != nil || o.timeout <= 0 {
		return fmt.Errorf("--store-timeout %q: want a positive duration such as 5s", o.timeoutText)
	}
	format, jp, err := output.Parse(o.output)
	if err != nil {
		return err
	}
	if jp != nil {
		o.output, o.jsonPath = format, jp
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return errors.New("--store-cert-file and --store-key-file go together")
	}
	if strings.TrimSpace(o.endpoints) == "" {
		return errors.New("--store-endpoints is empty")
	}
	if strings.Contains(o.namespace, "/") || strings.HasPrefix(o.namespace, ".") {
		return fmt.Errorf("--namespace %q: want a namespace name", o.namespace)
	}
	return nil
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
