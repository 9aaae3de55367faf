package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// CutProxy forwards loopback TCP connections to a target until it is cut:
// then every connection is dropped and new ones are closed at once, as a
// network partition between one client and its server would.
type CutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// NewCutProxy listens on a loopback port and forwards to target
// ("host:port"); it is closed when the test ends.
func NewCutProxy(t testing.TB, target string) *CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close(); p.SetCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				_ = c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				_ = c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return p
}

// URL is the proxy's address as a NATS URL.
func (p *CutProxy) URL() string { return "nats://" + p.ln.Addr().String() }

// SetCut cuts (closing every forwarded connection) or heals the proxy.
func (p *CutProxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.conns = nil
	}
}

// Open reports how many forwarded connections are open (each counted once,
// client side).
func (p *CutProxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}
