// Command clusterdemo is the `make run` demo on the real single-node cluster of hack/cluster:
// it starts the store (a real etcd on the pod bridge), installs registrar from
// dist/install.yaml, deploys an annotated demo Deployment, prints how to watch it, and runs
// until interrupted.
package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/pkg/wire"
	"github.com/registrar-dev/registrar/test/e2e/install"
	"github.com/registrar-dev/registrar/test/support/etcdtest"
)

const (
	demoNamespace = "demo"
	demoService   = "orders"
	demoReplicas  = 3
)

func main() {
	kubeconfig := flag.String("kubeconfig", "bin/cluster/admin.kubeconfig", "admin kubeconfig of the cluster")
	nodeIP := flag.String("node-ip", "10.88.77.1", "the bridge address of the node: the store listens there")
	manifests := flag.String("manifests", "dist/install.yaml", "registrar's install manifests")
	state := flag.String("state", "bin/cluster/demo", "directory for the store's data")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *nodeIP, *manifests, *state); err != nil {
		fmt.Fprintln(os.Stderr, "clusterdemo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, nodeIP, manifests, state string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1beta1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	store, err := etcdtest.StartOn(state, nodeIP)
	if err != nil {
		return fmt.Errorf("start the store: %w", err)
	}
	defer store.Stop()
	fmt.Printf("store: etcd at %s\n", store.Endpoint())

	setup, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := install.Registrar(setup, c, cfg, manifests, store.Endpoint()); err != nil {
		return fmt.Errorf("install registrar: %w", err)
	}
	fmt.Println("registrar: installed from", manifests)
	if err := deployDemo(setup, c); err != nil {
		return err
	}
	if err := waitRegistered(setup, store, demoReplicas); err != nil {
		return err
	}
	abs, _ := filepath.Abs(kubeconfig)
	fmt.Printf(`
registrar runs on a real single-node cluster with an annotated demo Deployment registered.
In another shell:
  export KUBECONFIG=%s
  kubectl get sreg -n %s -w                         # registrations as they happen
  kubectl describe pod -n %s -l app=%s              # WarmedUp, Registered events; the registrar.dev/ready gate
  kubectl rollout restart deployment/%s -n %s        # watch the store follow a rolling update
  curl -s -X POST %s/v3/kv/range -d '{"key":"%s","range_end":"%s"}'   # the store (base64 keys and values)
Ctrl-C stops the demo (and the cluster, unless KEEP_CLUSTER=1).
`, abs, demoNamespace, demoNamespace, demoService, demoService, demoNamespace, store.Endpoint(),
		b64(wire.ServicePrefix("", demoService)), b64(strings.TrimSuffix(wire.ServicePrefix("", demoService), "/")+"0"))
	<-ctx.Done()
	return nil
}

func deployDemo(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("create namespace %s: %w", demoNamespace, err)
	}
	d := install.DemoDeployment(demoNamespace, demoService, demoReplicas, install.RegistrarAnnotations(demoService), nil)
	d.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err := c.Patch(ctx, d, client.Apply, client.FieldOwner("registrar-demo"), client.ForceOwnership); err != nil { //nolint:staticcheck,lll // SA1019: typed apply configurations are their own change
		return fmt.Errorf("apply the demo Deployment: %w", err)
	}
	fmt.Printf("demo: Deployment %s/%s (%d replicas) annotated registrar.dev/service=%s\n", demoNamespace, demoService, demoReplicas, demoService)
	return nil
}

func waitRegistered(ctx context.Context, store *etcdtest.Server, n int) error {
	cli, err := store.Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	prefix := wire.ServicePrefix("", demoService)
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == int64(n), nil
	})
	if err != nil {
		return fmt.Errorf("the demo's %d endpoints did not reach the store: %w", n, err)
	}
	fmt.Printf("demo: %d endpoints registered under %s\n", n, prefix)
	return nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
