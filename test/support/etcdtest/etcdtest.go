// Package etcdtest runs a real etcd server process (the binary hack/envtest-assets.sh builds)
// for tests: a store that can be stopped and started again on the same ports and data.
package etcdtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/proc"
)

// Server is one etcd process on loopback.
type Server struct {
	bin, dataDir       string
	clientURL, peerURL string
	extraArgs          []string
	mu                 sync.Mutex
	proc               *proc.Process
}

// Binary finds the etcd binary: $ETCD_BIN, else $KUBEBUILDER_ASSETS/etcd.
func Binary() (string, error) {
	for _, p := range []string{os.Getenv("ETCD_BIN"), filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "etcd")} {
		if p == "" || p == "etcd" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no etcd binary: set ETCD_BIN or KUBEBUILDER_ASSETS (make test does, after hack/envtest-assets.sh)")
}

// Start launches etcd on 127.0.0.1 with a fresh data directory under dir and waits until it
// serves.
func Start(dir string) (*Server, error) { return StartOn(dir, "127.0.0.1") }

// StartOn is Start with the client URL on host (an IP of this machine), e.g. a bridge
// address that pods can reach too.
func StartOn(dir, host string) (*Server, error) { return StartWith(dir, host) }

// StartWith is StartOn with more etcd flags (e.g. --unsafe-no-fsync for a diagnostic).
func StartWith(dir, host string, extraArgs ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	ports, err := ports.FreePorts(2)
	if err != nil {
		return nil, err
	}
	s := &Server{
		bin:       bin,
		dataDir:   filepath.Join(dir, "etcd-data"),
		clientURL: fmt.Sprintf("http://%s:%d", host, ports[0]),
		peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		extraArgs: extraArgs,
	}
	return s, s.Resume()
}

// Endpoint is the client URL of the server.
func (s *Server) Endpoint() string { return s.clientURL }

// Resume starts the process again (after Stop) on the same ports and data, and waits until
// it serves.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.proc == nil {
		s.proc, err = proc.Start(proc.Config{Name: "etcd", Bin: s.bin, Env: Env(), LogPath: s.dataDir + ".log",
			Args: append([]string{"--name", "store", "--data-dir", s.dataDir,
				"--listen-client-urls", s.clientURL, "--advertise-client-urls", s.clientURL,
				"--listen-peer-urls", s.peerURL, "--initial-advertise-peer-urls", s.peerURL,
				"--initial-cluster", "store=" + s.peerURL, "--log-level", "error"}, s.extraArgs...)})
	} else {
		err = s.proc.Resume()
	}
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	cli, err := s.Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	return pollReady(cli, s.proc, 30*time.Second)
}

// Stop kills the process (data is kept; Resume starts it again).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Kill()
	}
}

// Client returns a new client of the server; the caller closes it.
func (s *Server) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{s.clientURL},
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// Env is this process's environment without the ETCD_* variables, which etcd would read as
// flags: the environment to start an etcd with.
func Env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			out = append(out, kv)
		}
	}
	return out
}
