// Package corednstest runs a real CoreDNS process (the etcd-plugin-only build hack/coredns.sh
// makes) for tests, serving one zone from an etcd on a 127.0.0.x address.
package corednstest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/proc"
)

// Binary finds the CoreDNS binary: $COREDNS_BIN, else the newest bin/coredns-v* of the
// module this test runs in (make test builds it with hack/coredns.sh).
func Binary() (string, error) {
	if p := os.Getenv("COREDNS_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("COREDNS_BIN: %w", err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			matches, _ := filepath.Glob(filepath.Join(dir, "bin", "coredns-v*"))
			if len(matches) > 0 {
				return matches[len(matches)-1], nil
			}
			break
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	return "", errors.New("no CoreDNS binary: run hack/coredns.sh (make test does) or set COREDNS_BIN")
}

// Server is one CoreDNS process.
type Server struct {
	// Addr is the host:port it serves DNS on (UDP and TCP).
	Addr string
	proc *proc.Process
	once sync.Once
}

// Start runs CoreDNS serving zone from the etcd at etcdEndpoint under pathPrefix, writing its
// Corefile under dir, and waits until it answers.
func Start(dir, zone, pathPrefix, etcdEndpoint string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // a port picked as free may be taken by the time CoreDNS binds it
		addr, err := ports.FreeUDPAndTCP()
		if err != nil {
			return nil, err
		}
		s, err := start(bin, dir, zone, pathPrefix, etcdEndpoint, addr)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(bin, dir, zone, pathPrefix, etcdEndpoint, addr string) (*Server, error) {
	host, port, _ := net.SplitHostPort(addr)
	corefile := fmt.Sprintf("%s:%s {\n  bind %s\n  errors\n  etcd {\n    path %s\n    endpoint %s\n  }\n}\n",
		dns.Fqdn(zone), port, host, pathPrefix, etcdEndpoint)
	path := filepath.Join(dir, "Corefile-"+port)
	if err := os.WriteFile(path, []byte(corefile), 0o600); err != nil {
		return nil, fmt.Errorf("write Corefile: %w", err)
	}
	p, err := proc.Start(proc.Config{Name: "CoreDNS on " + addr, Bin: bin, Args: []string{"-conf", path, "-quiet"}, LogPath: path + ".log"})
	if err != nil {
		return nil, fmt.Errorf("start CoreDNS: %w", err)
	}
	s := &Server{Addr: addr, proc: p}
	if err := s.waitReady(dns.Fqdn(zone), 30*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) waitReady(zone string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := s.Query(zone, dns.TypeSOA); err == nil {
			return nil
		}
		if err := s.proc.Exited(); err != nil {
			return fmt.Errorf("CoreDNS on %s exited before serving: %w", s.Addr, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CoreDNS on %s not answering after %s", s.Addr, timeout)
		}
		time.Sleep(50 * time.Millisecond) // polling a starting process, not synchronising a test
	}
}

// Query asks the server one question over UDP (2 s timeout) and returns the reply.
func (s *Server) Query(name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, s.Addr)
	if err != nil {
		return nil, fmt.Errorf("query %s %s at %s: %w", name, dns.TypeToString[qtype], s.Addr, err)
	}
	return r, nil
}

// Stop kills the process.
func (s *Server) Stop() {
	s.once.Do(s.proc.Kill)
}
