// Package zktest runs a real ZooKeeper server (Debian's package, which hack/zookeeper.sh
// installs) as a standalone process on a 127.0.0.x address with its own data directory and
// configuration: a store that can be stopped and started again on the same port and data.
package zktest

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/registrar-dev/registrar/test/support/ports"
	"github.com/registrar-dev/registrar/test/support/proc"
)

// TickTime is the server's tick: sessions time out after 2 to 20 ticks.
const TickTime = 200 * time.Millisecond

// Jar finds ZooKeeper's jar (its manifest names the dependencies): $ZOOKEEPER_JAR, else
// Debian's /usr/share/java/zookeeper.jar.
func Jar() (string, error) {
	jar := os.Getenv("ZOOKEEPER_JAR")
	if jar == "" {
		jar = "/usr/share/java/zookeeper.jar"
	}
	if _, err := os.Stat(jar); err != nil {
		return "", fmt.Errorf("no ZooKeeper jar (%w): run hack/zookeeper.sh (make test does) or set ZOOKEEPER_JAR", err)
	}
	return jar, nil
}

// Server is one standalone ZooKeeper process.
type Server struct {
	// Addr is the client address, host:port.
	Addr     string
	jar, cfg string
	mu       sync.Mutex
	proc     *proc.Process
}

// Start writes a configuration and data directory under dir and starts ZooKeeper on a free
// port of a random 127.0.0.x address, waiting until it serves.
func Start(dir string) (*Server, error) {
	jar, err := Jar()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // a port picked as free may be taken by the time the server binds it
		addr, err := ports.FreeAddr(ports.RandomLoopbackHost())
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: addr, jar: jar}
		if err := s.configure(dir); err != nil {
			return nil, err
		}
		if lastErr = s.Resume(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

func (s *Server) configure(dir string) error {
	host, port, _ := net.SplitHostPort(s.Addr)
	data := filepath.Join(dir, "zookeeper-"+port)
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("ZooKeeper data dir: %w", err)
	}
	s.cfg = filepath.Join(data, "zoo.cfg")
	cfg := fmt.Sprintf("tickTime=%d\ndataDir=%s\nclientPort=%s\nclientPortAddress=%s\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok\n",
		TickTime.Milliseconds(), data, port, host)
	if err := os.WriteFile(s.cfg, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("write ZooKeeper config: %w", err)
	}
	return nil
}

// Resume starts the process (again, after Stop) on the same address and data, and waits
// until it serves.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.proc == nil {
		classpath := s.jar
		if nop := filepath.Join(filepath.Dir(s.jar), "slf4j-nop.jar"); fileExists(nop) {
			classpath += string(filepath.ListSeparator) + nop // no "no logger bound" notice
		}
		s.proc, err = proc.Start(proc.Config{Name: "ZooKeeper on " + s.Addr, Bin: "java", LogPath: s.cfg + ".log",
			Args: []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
				"-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", s.cfg}})
	} else {
		err = s.proc.Resume()
	}
	if err != nil {
		return fmt.Errorf("start ZooKeeper: %w", err)
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		s.proc.Kill()
		return err
	}
	return nil
}

// waitReady polls the "srvr" command until the server reports its mode, which it does only
// once it serves requests ("ruok" answers "imok" as soon as the process runs, before it
// accepts sessions).
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if s.serving() {
			return nil
		}
		if err := s.proc.Exited(); err != nil {
			return fmt.Errorf("ZooKeeper on %s exited before serving: %w", s.Addr, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ZooKeeper on %s not serving after %s", s.Addr, timeout)
		}
		time.Sleep(100 * time.Millisecond) // polling a starting process, not synchronising a test
	}
}

func (s *Server) serving() bool {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	reply, _ := io.ReadAll(c)
	return strings.Contains(string(reply), "Mode: ")
}

// Stop kills the process; its data stays for Resume.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Kill()
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
