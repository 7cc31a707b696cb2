package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-dev/registrar/bench/controlplane"
)

// The discovery watchers run in a process of their own (this executable, re-run with
// watchersEnv set): 1,000 pkg/discovery Clients of a 2,000-pod service are most of the bench's
// CPU and memory, and in the process of the xDS clients they starved those clients' gRPC
// transports (streams closed by the server's keepalive). Apart, each process's CPU is told
// apart too. The watchers' process writes, on stdout, "synced" once every watcher listed
// the service and "done <kind> <pod> <unix ns>" when the last of its watchers had a change of
// a pod; it answers "count <prefix> <n>" on stdin with "count <watchers> <bytes>": how many
// watchers list exactly n pods, all named with prefix ("-": any), and the bytes their etcd
// clients received so far.

// watchersEnv names the watchers' process: "endpoint,watchers,sync timeout".
const watchersEnv = "ROLLOUT_WATCHERS"

// aggregate counts, per change of a pod, the watchers that have it, and reports the change
// once all have.
type aggregate struct {
	n      int32
	counts sync.Map // tkey → *atomic.Int32
	mu     sync.Mutex
	out    *bufio.Writer
}

func (a *aggregate) observe(_ group, pod string, k kind, at time.Time) {
	key := tkey{pod, k}
	v, ok := a.counts.Load(key)
	if !ok {
		v, _ = a.counts.LoadOrStore(key, new(atomic.Int32))
	}
	if v.(*atomic.Int32).Add(1) == a.n {
		a.line(fmt.Sprintf("done %d %s %d", k, pod, at.UnixNano()))
	}
}

func (a *aggregate) line(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _ = a.out.WriteString(s + "\n")
	_ = a.out.Flush()
}

// serveWatchers is the watchers' process.
func serveWatchers(spec string) error {
	f := strings.Split(spec, ",")
	if len(f) != 3 {
		return fmt.Errorf("%s=%q: want endpoint,watchers,timeout", watchersEnv, spec)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return err
	}
	timeout, err := time.ParseDuration(f[2])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agg := &aggregate{n: int32(n), out: bufio.NewWriter(os.Stdout)}
	ws, err := startWatchers(ctx, f[0], service, namespace, n, agg, timeout)
	if err != nil {
		return err
	}
	defer ws.stop()
	agg.line("synced")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var prefix string
		var size int
		if _, err := fmt.Sscanf(in.Text(), "count %s %d", &prefix, &size); err != nil {
			return fmt.Errorf("command %q: %w", in.Text(), err)
		}
		if prefix == "-" {
			prefix = ""
		}
		k := 0
		for _, w := range ws.ws {
			if held := w.pods(); len(held) == size && allPrefixed(held, prefix) {
				k++
			}
		}
		agg.line(fmt.Sprintf("count %d %d", k, ws.bytes.n.Load()))
	}
	return nil // stdin closed: the run is over
}

func allPrefixed(names []string, prefix string) bool {
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			return false
		}
	}
	return true
}

// watcherProc is the parent's side of the watchers' process.
type watcherProc struct {
	n       int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	mu      sync.Mutex // one count at a time
	replies chan string
	exited  chan struct{}
}

// startWatcherProc starts n watchers in their process and waits until they listed the
// service; their changes go to t (group groupWatchers, one observer: the process).
func startWatcherProc(endpoint string, n int, t *tracker, timeout time.Duration, logPath string) (*watcherProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &watcherProc{n: n, replies: make(chan string, 1), exited: make(chan struct{})}
	p.cmd = exec.Command(exe)
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%s", watchersEnv, endpoint, n, timeout))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = logf
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the watchers' process: %w", err)
	}
	synced := make(chan struct{})
	go func() {
		defer close(p.exited)
		defer logf.Close()
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			fs := strings.Fields(lines.Text())
			switch {
			case len(fs) == 1 && fs[0] == "synced":
				close(synced)
			case len(fs) == 4 && fs[0] == "done":
				k, _ := strconv.Atoi(fs[1])
				ns, _ := strconv.ParseInt(fs[3], 10, 64)
				t.observe(groupWatchers, fs[2], kind(k), time.Unix(0, ns))
			case len(fs) == 3 && fs[0] == "count":
				p.replies <- lines.Text()
			}
		}
		_ = p.cmd.Wait()
	}()
	select {
	case <-synced:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("the watchers' process exited before its watchers listed the service; see %s", logPath)
	case <-time.After(timeout + time.Minute):
		p.stop()
		return nil, fmt.Errorf("the watchers did not list the service within %s; see %s", timeout, logPath)
	}
}

// count asks how many watchers list exactly size pods named with prefix, and the bytes their
// etcd clients received.
func (p *watcherProc) count(prefix string, size int) (int, int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prefix == "" {
		prefix = "-"
	}
	if _, err := fmt.Fprintf(p.stdin, "count %s %d\n", prefix, size); err != nil {
		return 0, 0, fmt.Errorf("the watchers' process: %w", err)
	}
	select {
	case line := <-p.replies:
		var k int
		var b int64
		_, err := fmt.Sscanf(line, "count %d %d", &k, &b)
		return k, b, err
	case <-p.exited:
		return 0, 0, errors.New("the watchers' process exited")
	case <-time.After(time.Minute):
		return 0, 0, errors.New("the watchers' process did not answer within a minute")
	}
}

// usage is the bytes the watchers received so far and their process's CPU seconds (zeros
// without watchers).
func (p *watcherProc) usage(pods int) (int64, float64, error) {
	if p == nil {
		return 0, 0, nil
	}
	_, b, err := p.count("", pods)
	if err != nil {
		return 0, 0, err
	}
	u, err := controlplane.ReadUsage(p.cmd.Process.Pid)
	return b, u.CPUSeconds, err
}

func (p *watcherProc) stop() {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}
