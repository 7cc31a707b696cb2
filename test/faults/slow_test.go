package faults

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/registrar-dev/registrar/api/v1beta1"
	"github.com/registrar-dev/registrar/internal/store/etcd/etcdclient"
)

// delayProxy forwards TCP connections to a target, holding every chunk for the current
// delay in each direction (pipelined: latency, not a throughput limit).
type delayProxy struct {
	l      net.Listener
	target string
	delay  atomic.Int64
	wg     sync.WaitGroup
}

func startDelayProxy(t *testing.T, target string) *delayProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{l: l, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { _ = l.Close(); p.wg.Wait() })
	return p
}

func (p *delayProxy) addr() string             { return "http://" + p.l.Addr().String() }
func (p *delayProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *delayProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = in.Close()
			continue
		}
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, each chunk delayed; it closes both ends when either fails.
func (p *delayProxy) pipe(src, dst net.Conn) {
	q := make(chan chunk, 256) // bounded: a full queue stops reading (backpressure)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32*1024)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{data: buf[:n], due: time.Now().Add(time.Duration(p.delay.Load()))}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.due)) // the injected latency
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	_ = src.Close()
	_ = dst.Close()
	for range q { // drain so the reader can exit
	}
	_, _ = io.Copy(io.Discard, src)
}

// TestSlowStore: the store answers slowly (a delaying proxy), not never. Pod events of
// several registries at once are reconciled in parallel: their registration lags stay
// about one slow round trip each instead of adding up; a hung write is cut by
// --store-timeout and reported; when the latency goes, everything converges.
func TestSlowStore(t *testing.T) {
	slow(t)
	srv := startStore(t)
	proxy := startDelayProxy(t, srv.Endpoint()[len("http://"):])
	s := newScenario(t, []string{srv.Endpoint()}) // the test reads the store directly
	const others = 5
	for i := range others {
		reg := &v1beta1.ServiceRegistry{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: fmt.Sprintf("svc-%d", i)},
			Spec: v1beta1.ServiceRegistrySpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("svc-%d", i)}},
				Ports:    []v1beta1.ServicePort{{Name: "http", Port: 8080}},
			},
		}
		if err := k8s.Create(s.ctx, reg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.forceDelete(reg) })
		s.checks.alsoOwned = append(s.checks.alsoOwned, fmt.Sprintf("%s/svc-%d/%s/", prefix, i, s.ns))
	}
	cfg := s.operatorConfig()
	cfg.store = proxy.addr()
	cfg.extra = []string{"--store-timeout=3s", "--max-concurrent-reconciles=8"}
	startOperator(t, "registrar", cfg)
	s.addReady()
	s.converge(time.Now())

	// 400 ms each way: one store call takes about 0.8 s, a reconcile (list + write) 1.6 s.
	const delay = 400 * time.Millisecond
	proxy.setDelay(delay)
	time.Sleep(time.Second) // let the connection's in-flight keepalives pass the new delay: scenario pacing
	rtt := proxiedRoundTrip(t, proxy)
	if rtt < 2*delay {
		t.Fatalf("a read through the proxy took %s, want at least %s", rtt, 2*delay)
	}
	start := time.Now()
	for i := range others {
		otherPod(t, s, i)
	}
	lags := make([]time.Duration, others)
	for i := range others {
		key := fmt.Sprintf("%s/svc-%d/%s/svc-%d-pod", prefix, i, s.ns, i)
		if !waitFor(time.Minute, func() bool {
			resp, err := s.store.Get(s.ctx, key)
			return err == nil && len(resp.Kvs) == 1
		}) {
			t.Fatalf("%s not registered through the slow store", key)
		}
		lags[i] = time.Since(start)
	}
	worst := lags[others-1]
	// A write is visible after one leg (the request), its reconcile ends after the second.
	// Serialised, the last registry would wait for every other one's write round trip.
	serial := time.Duration(others-1)*2*delay + delay
	if worst >= serial {
		t.Errorf("last of %d registries registered after %s: no better than one at a time (%s)", others, worst, serial)
	}

	// Slower than --store-timeout: calls are cut at the timeout, status says so.
	proxy.setDelay(4 * time.Second)
	s.addReady()
	if !waitFor(time.Minute, func() bool { c := s.storeSynced(); return c != nil && c.Status == metav1.ConditionFalse }) {
		t.Error("StoreSynced did not turn False while every call outlasted --store-timeout")
	}
	proxy.setDelay(0)
	back := s.faultEnded()
	conv := s.converge(back)
	s.finish("8. store slow (delaying TCP proxy)", conv,
		fmt.Sprintf("400 ms each way (a read took %s): %d registries' pods registered after %s…%s (one at a time the last would be ≥%s); 4 s each way (> --store-timeout 3s): StoreSynced=False; latency removed: converged %s",
			rtt.Round(10*time.Millisecond), others, lags[0].Round(10*time.Millisecond), worst.Round(10*time.Millisecond), serial, conv.Round(10*time.Millisecond)))
}

// otherPod creates a ready pod for registry svc-i (outside the scenario's world: only the
// scenario's own service is checked pod by pod).
func otherPod(t *testing.T, s *scenario, i int) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: fmt.Sprintf("svc-%d-pod", i), Labels: map[string]string{"app": fmt.Sprintf("svc-%d", i)}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	if err := k8s.Create(s.ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := setReady(context.Background(), pod, fmt.Sprintf("10.200.0.%d", i+1), true); err != nil {
		t.Fatal(err)
	}
}

// proxiedRoundTrip times one read through the proxy with a new client.
func proxiedRoundTrip(t *testing.T, p *delayProxy) time.Duration {
	t.Helper()
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{p.addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "warm-up"); err != nil { // connection set-up is not the round trip
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := cli.Get(ctx, "probe"); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}
