// Package netproxy is a TCP proxy a test puts between a client and a real server, to cut the
// client off (a partition of that client only) and let it through again.
package netproxy

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy in front of a server that a test can cut, to partition a client from
// the server (for as long as it takes the server to expire the client's session), and restore.
type Proxy struct {
	// Addr is where clients connect.
	Addr     string
	target   string
	listener net.Listener
	mu       sync.Mutex
	cut      bool
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// New listens on 127.0.0.1 and forwards every connection to target.
func New(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, listener: l, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every proxied connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	_ = p.listener.Close()
	p.Cut()
	p.wg.Wait()
}
