// Package ports hands out free loopback addresses for the servers tests start.
//
// A port the kernel just handed out can be taken by someone else before the server binds
// it; the callers that start a real process retry with a new address when it fails to bind.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// FreeAddr returns host:port with a TCP port the kernel just handed out on host.
func FreeAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreeLoopback is FreeAddr on 127.0.0.1.
func FreeLoopback() (string, error) { return FreeAddr("127.0.0.1") }

// FreePorts returns n distinct TCP ports free on 127.0.0.1 (all held open until every one
// is picked, so they differ).
func FreePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		listeners = append(listeners, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// RandomLoopbackHost is a random address of 127.0.0.2 to 127.0.0.251, so that servers of
// concurrent tests (and their fixed ports) rarely meet.
func RandomLoopbackHost() string { return "127.0.0." + strconv.Itoa(2+rand.IntN(250)) }

// FreeUDPAndTCP returns host:port free for both UDP and TCP on a random loopback host (a DNS
// server's address).
func FreeUDPAndTCP() (string, error) {
	host := RandomLoopbackHost()
	u, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("free UDP port on %s: %w", host, err)
	}
	defer u.Close()
	addr := u.LocalAddr().String()
	t, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("free TCP port %s: %w", addr, err)
	}
	_ = t.Close()
	return addr, nil
}
