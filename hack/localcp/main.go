// Command localcp starts a local Kubernetes control plane (the kube-apiserver and etcd that
// hack/envtest-assets.sh built) with registrar's CRDs installed, writes an admin kubeconfig,
// and runs until interrupted. `make run` uses it when no cluster is reachable.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/registrar-dev/registrar/test/support/testenv"
)

func main() {
	kubeconfig := flag.String("kubeconfig-out", "bin/local/kubeconfig", "Where to write the admin kubeconfig.")
	crds := flag.String("crds", "config/crd/bases", "Directory of CRDs to install.")
	flag.Parse()
	if err := run(*kubeconfig, *crds); err != nil {
		fmt.Fprintln(os.Stderr, "localcp:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, crds string) error {
	env, err := testenv.Start(testenv.Options{CRDs: crds})
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	defer func() { _ = env.Stop() }()
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o700); err != nil {
		return fmt.Errorf("kubeconfig dir: %w", err)
	}
	if err := env.WriteAdminKubeconfig("admin", kubeconfig); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	defer os.Remove(kubeconfig)
	fmt.Printf("control plane ready at %s; kubeconfig: %s\n", env.Config.Host, kubeconfig)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}
