package faults

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
)

// restartedAPIServer is a kube-apiserver process a test started again with envtest's own
// command line (same port, certificates and etcd), so every kubeconfig stays valid.
type restartedAPIServer struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func (a *restartedAPIServer) stop() {
	_ = a.cmd.Process.Kill()
	<-a.exited
}

// apiServerProcess finds the running kube-apiserver serving restCfg.Host: its pid and
// command line.
func apiServerProcess() (int, []string, error) {
	u, err := url.Parse(restCfg.Host)
	if err != nil {
		return 0, nil, err
	}
	flag := "--secure-port=" + u.Port()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(raw, []byte("kube-apiserver")) {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		for _, a := range args {
			if a == flag {
				pid, _ := strconv.Atoi(filepath.Base(d))
				return pid, args, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("no kube-apiserver process with %s", flag)
}

// stopAPIServer stops the API server and returns a function that starts it again, with
// the same command line, and waits until it serves.
func stopAPIServer(t *testing.T) (start func()) {
	t.Helper()
	pid, args, err := apiServerProcess()
	if err != nil {
		t.Fatal(err)
	}
	if apiServer != nil {
		apiServer.stop()
		apiServer = nil
	} else if err := syscall.Kill(pid, syscall.SIGKILL); err != nil { // envtest's process reaps it
		t.Fatalf("stop kube-apiserver %d: %v", pid, err)
	}
	if !waitFor(time.Minute, func() bool { _, _, err := apiServerProcess(); return err != nil }) {
		t.Fatal("kube-apiserver did not exit")
	}
	return func() {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		logf, err := os.Create(filepath.Join(t.TempDir(), "kube-apiserver.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("start kube-apiserver again: %v", err)
		}
		a := &restartedAPIServer{cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); _ = logf.Close(); close(a.exited) }()
		apiServer = a
		if !waitFor(2*time.Minute, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return k8s.List(ctx, &corev1.NamespaceList{}) == nil
		}) {
			t.Fatal("kube-apiserver did not serve again")
		}
	}
}

// TestAPIServerRestart: the API server goes away while the operator runs; a pod is
// deleted meanwhile (straight from the API server's etcd, as nothing else can write then);
// after the API server returns, watches resume and the deletion is not missed.
func TestAPIServerRestart(t *testing.T) {
	slow(t)
	srv := startStore(t)
	s := newScenario(t, []string{srv.Endpoint()})
	startOperator(t, "registrar", s.operatorConfig())
	for range 3 {
		s.addReady()
	}
	s.converge(time.Now())

	start := stopAPIServer(t)
	gone := "web-2"
	kcli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{testEnv.ControlPlane.Etcd.URL.String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer kcli.Close()
	s.world.ineligible(gone)
	resp, err := kcli.Delete(s.ctx, "/registry/pods/"+s.ns+"/"+gone, clientv3.WithPrevKV())
	if err != nil || resp.Deleted != 1 {
		t.Fatalf("delete pod %s from the API server's etcd: deleted %d, %v", gone, resp.Deleted, err)
	}
	time.Sleep(5 * time.Second) // the API server stays down a while: scenario, not synchronisation
	start()
	back := s.faultEnded()
	conv := s.converge(back)
	s.addReady() // watches resumed: a new pod registers
	s.unready("web-1")
	conv2 := s.converge(time.Now())
	s.finish("5. kube-apiserver restart, pod deleted while it was down", conv,
		fmt.Sprintf("deleted pod left the store %s after the API server served again; later pod events converged in %s",
			conv.Round(10*time.Millisecond), conv2.Round(10*time.Millisecond)))
}
