package testnet

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback address to a target, and
// can cut them: Down closes every connection it carries and answers new
// ones by closing them at once (a server that has gone away); Blackhole
// keeps every connection open but forwards nothing more either way (a
// network that drops packets, or a server that stopped answering). Up ends
// either. It stands between a client and a real server whose outage a
// test needs.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	hole  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target, closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the host:port clients connect to instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down, hole := p.down, p.hole
		if hole {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		if hole { // accepted, never answered
			p.wg.Add(1)
			go p.pipe(io.Discard, c)
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// track registers a connection pair, or closes it if the proxy went down
// meanwhile.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		a.Close()
		b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

// pipe copies src to dst until either fails, dropping what it reads while
// the proxy is a black hole.
func (p *Proxy) pipe(dst io.Writer, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.holding() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	src.Close()
	p.mu.Lock()
	delete(p.conns, src)
	if c, ok := dst.(net.Conn); ok {
		c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
}

func (p *Proxy) holding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hole
}

// Blackhole stops forwarding on every connection, open or new, without
// closing any, until Up.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.hole = true
	p.mu.Unlock()
}

// Down cuts every connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// Up ends Down and Blackhole: new connections go through again, and so
// does whatever open connections send from now on.
func (p *Proxy) Up() {
	p.mu.Lock()
	p.down, p.hole = false, false
	p.mu.Unlock()
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Down()
	p.wg.Wait()
}
