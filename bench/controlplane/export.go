package controlplane

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/test/support/proc"
)

// Cluster is the control plane of a run, started for another harness (bench/rollout): the
// API server and its etcd (envtest, writing to disk), the store etcd and the operator as a
// process built from ./cmd, started as Run starts them. Of Config it reads WorkDir, Operator,
// OperatorArgs, Reconciles, ProfileDir (serves the operator's pprof), StoreNoFsync and
// KubeEtcdNoFsync; EndpointSlice starts kube-controller-manager too.
type Cluster struct{ cl *cluster }

// StartCluster starts a Cluster; Stop it when done.
func StartCluster(ctx context.Context, c Config) (*Cluster, error) {
	c.Defaults()
	cl, err := startCluster(ctx, &c)
	if err != nil {
		return nil, err
	}
	return &Cluster{cl: cl}, nil
}

// RESTConfig reaches the API server as an admin, in protobuf for built-in types.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.cl.cfg) }

// Kube is a clientset (protobuf); Client a controller-runtime client (registrar's API too).
func (c *Cluster) Kube() kubernetes.Interface { return c.cl.kube }
func (c *Cluster) Client() client.Client      { return c.cl.client }

// StoreEndpoint is the store etcd's client URL; StoreClient a client of it.
func (c *Cluster) StoreEndpoint() string         { return c.cl.store.Endpoint() }
func (c *Cluster) StoreClient() *clientv3.Client { return c.cl.storeCli }

// Operator is the registrar process; PprofAddr its pprof address ("" without
// Config.ProfileDir) and MetricsAddr its metrics address.
func (c *Cluster) Operator() *proc.Process { return c.cl.operator }
func (c *Cluster) PprofAddr() string       { return c.cl.pprof }
func (c *Cluster) MetricsAddr() string     { return c.cl.metrics }

// Stop stops every component.
func (c *Cluster) Stop() { c.cl.stop() }

// ReadUsage reads a process's CPU and memory from /proc.
func ReadUsage(pid int) (Usage, error) { return readUsage(pid) }
