package ctl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/registrar-dev/registrar/pkg/discovery"
)

// connect returns an etcd client for the store flags; the caller closes it.
func (r *runner) connect() (*clientv3.Client, error) {
	var tlsCfg *tls.Config
	if r.opts.caFile != "" || r.opts.certFile != "" {
		info := transport.TLSInfo{TrustedCAFile: r.opts.caFile, CertFile: r.opts.certFile, KeyFile: r.opts.keyFile}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("store TLS config: %w", err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: strings.Split(r.opts.endpoints, ","), DialTimeout: r.opts.timeout, TLS: tlsCfg, Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to store %s: %w", r.opts.endpoints, err)
	}
	return cli, nil
}

// storeCode is the exit code of a store error: unreachable or anything else.
func storeCode(err error) int {
	if errors.Is(err, context.DeadlineExceeded) {
		return ExitUnreachable
	}
	if s, ok := status.FromError(errors.Unwrap(err)); ok && (s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded) {
		return ExitUnreachable
	}
	if s, ok := status.FromError(err); ok && (s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded) {
		return ExitUnreachable
	}
	return ExitError
}

// read lists the instances under prefix (every service when service is empty), sorted by
// service then key. Keys whose value is not an instance are reported on stderr.
func (r *runner) read(ctx context.Context, service string) ([]discovery.Instance, int) {
	cli, err := r.connect()
	if err != nil {
		return nil, r.fail(ExitError, "%v", err)
	}
	defer func() { _ = cli.Close() }()
	prefix := discovery.ServicePrefix(r.opts.prefix, "") // every service
	switch {
	case service != "" && r.opts.namespace != "":
		prefix = discovery.ScopePrefix(r.opts.prefix, service, r.opts.namespace)
	case service != "":
		prefix = discovery.ServicePrefix(r.opts.prefix, service)
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		code := storeCode(err)
		if code == ExitUnreachable {
			return nil, r.fail(code, "store %s unreachable: %v", r.opts.endpoints, err)
		}
		return nil, r.fail(code, "list %s: %v", prefix, err)
	}
	out := make([]discovery.Instance, 0, len(resp.Kvs))
	own := discovery.ServicePrefix(r.opts.prefix, ".registrar") // the operator's and the breakers' keys
	for _, kv := range resp.Kvs {
		if strings.HasPrefix(string(kv.Key), own) {
			continue
		}
		inst, err := discovery.DecodeInstance(string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			fmt.Fprintf(r.env.Stderr, "registrarctl: skipping %v\n", err)
			continue
		}
		out = append(out, inst)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Service != out[j].Service {
			return out[i].Service < out[j].Service
		}
		return out[i].Key < out[j].Key
	})
	return out, ExitOK
}

func (r *runner) list(ctx context.Context, args []string) int {
	service := ""
	if len(args) == 1 {
		service = args[0]
		if strings.Contains(service, "/") {
			return r.fail(ExitUsage, "list takes a service name, not %q", service)
		}
	}
	insts, code := r.read(ctx, service)
	if code != ExitOK {
		return code
	}
	insts = filterNamespace(filterCluster(insts, r.opts.cluster), r.opts.namespace)
	if err := r.printInstances(insts); err != nil {
		return r.fail(ExitError, "%v", err)
	}
	if service != "" && len(insts) == 0 {
		if r.opts.namespace != "" {
			return r.fail(ExitNotFound, "no instances of %q from namespace %s under %s", service, r.opts.namespace, r.opts.prefix)
		}
		return r.fail(ExitNotFound, "no instances of %q under %s", service, r.opts.prefix)
	}
	return ExitOK
}

// get prints one instance: SERVICE/NAMESPACE/POD, or SERVICE/POD when the pod name is
// unique across namespaces.
func (r *runner) get(ctx context.Context, ref string) int {
	parts := strings.Split(ref, "/")
	if len(parts) < 2 || len(parts) > 3 || slicesContainsEmpty(parts) {
		return r.fail(ExitUsage, "get wants SERVICE/NAMESPACE/POD or SERVICE/POD, not %q", ref)
	}
	insts, code := r.read(ctx, parts[0])
	if code != ExitOK {
		return code
	}
	var match []discovery.Instance
	for _, inst := range insts {
		if inst.Pod == parts[len(parts)-1] && (len(parts) == 2 || inst.Namespace == parts[1]) {
			match = append(match, inst)
		}
	}
	switch len(match) {
	case 0:
		return r.fail(ExitNotFound, "instance %q not found under %s", ref, r.opts.prefix)
	case 1:
	default:
		return r.fail(ExitError, "%q is ambiguous: %d namespaces have that pod; use SERVICE/NAMESPACE/POD", ref, len(match))
	}
	if err := r.printOne(match[0]); err != nil {
		return r.fail(ExitError, "%v", err)
	}
	return ExitOK
}

func slicesContainsEmpty(parts []string) bool {
	for _, p := range parts {
		if p == "" {
			return true
		}
	}
	return false
}
