package acmetest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ConnectProxy is an HTTP proxy that tunnels every CONNECT to target, whatever host it
// names, so apt reaches an edge's HTTPS listener for a hostname no DNS knows. It
// returns its address and the hosts CONNECT asked for.
func ConnectProxy(t testing.TB, target string) (string, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil || req.Method != http.MethodConnect {
					io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
					return
				}
				mu.Lock()
				asked = append(asked, req.Host)
				mu.Unlock()
				up, err := net.Dial("tcp", target)
				if err != nil {
					io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
					return
				}
				defer up.Close()
				io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				go func() {
					io.Copy(up, br)
					up.(*net.TCPConn).CloseWrite()
				}()
				io.Copy(c, up)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
}

// Balancer is a TCP balancer on 127.0.0.1 in front of several backends: each
// connection goes to the backend Route chooses, or when that one refuses the
// connection (it is down) to the next, as HAProxy's redispatch does. Held, it accepts
// connections but keeps them waiting until released, as a load balancer in front of a
// slow edge would.
type Balancer struct {
	Addr string
	Port int

	mu       sync.Mutex
	backends []string
	pick     func(n int) int // connection number → backend index
	count    int
	hold     chan struct{} // non-nil: new connections wait for it to close
	held     chan struct{} // closed when a connection waits
	sent     map[string]int
	down     map[string]bool // backends whose last check failed
	redisp   int             // connections sent to another backend than the one picked
}

// NewBalancer listens on addr ("127.0.0.1:0" for any port) until the test ends, in front
// of backends (none yet: SetBackends), round robin; with no backend it closes each
// connection.
func NewBalancer(t testing.TB, addr string, backends ...string) *Balancer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	b := &Balancer{Addr: ln.Addr().String(), backends: backends, sent: map[string]int{}, down: map[string]bool{}}
	b.Port, _ = strconv.Atoi(port)
	b.pick = func(n int) int { return n }
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		b.Release()
	})
	return b
}

// SetBackends replaces the backends, for new connections: a balancer made before the
// daemons behind it started on kernel-chosen ports learns their addresses.
func (b *Balancer) SetBackends(backends ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = backends
}

// Route sends each new connection to backends[pick(n) % len], n counting connections
// from 0.
func (b *Balancer) Route(pick func(n int) int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pick = pick
}

// Hold makes new connections wait, unforwarded, until Release; held is closed when the
// first one waits.
func (b *Balancer) Hold() (held <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hold, b.held = make(chan struct{}), make(chan struct{})
	return b.held
}

// Release forwards the held connections, and the next ones at once.
func (b *Balancer) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hold != nil {
		close(b.hold)
		b.hold = nil
	}
}

// Sent counts the connections forwarded to each backend.
func (b *Balancer) Sent() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.sent {
		out[k] = v
	}
	return out
}

// dial connects to the backend picked for the next connection, or when it failed its
// check or refuses, to the next: checked backends first, the others if none answers.
func (b *Balancer) dial() net.Conn {
	b.mu.Lock()
	first := b.pick(b.count)
	b.count++
	var order []string
	picked := ""
	if len(b.backends) > 0 {
		picked = b.backends[first%len(b.backends)]
	}
	for _, ready := range []bool{true, false} {
		for i := range b.backends {
			if target := b.backends[(first+i)%len(b.backends)]; b.down[target] != ready {
				order = append(order, target)
			}
		}
	}
	b.mu.Unlock()
	for _, target := range order {
		if up, err := net.DialTimeout("tcp", target, 2*time.Second); err == nil {
			b.mu.Lock()
			b.sent[target]++
			if target != picked {
				b.redisp++
			}
			b.mu.Unlock()
			return up
		}
	}
	return nil
}

// Check asks each backend's health URL (health[backend], e.g. an edge's /readyz) every
// interval until the test ends, and sends new connections only to backends whose last
// answer was 200, or to the others when none is: HAProxy's option httpchk, failing
// open. Until its first check a backend counts as ready.
func (b *Balancer) Check(t testing.TB, health map[string]string, every time.Duration) {
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	// One kept-alive connection per backend: a check is no new connection, whose source
	// port could be one a restarting backend needs.
	client := &http.Client{Timeout: every + time.Second, Transport: &http.Transport{Proxy: nil}}
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			for backend, url := range health {
				resp, err := client.Get(url)
				ready := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					resp.Body.Close()
				}
				b.mu.Lock()
				b.down[backend] = !ready
				b.mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
}

// Redispatched counts the connections sent to another backend than the one picked,
// because that one failed its check or refused them.
func (b *Balancer) Redispatched() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.redisp
}

func (b *Balancer) serve(c net.Conn) {
	defer c.Close()
	b.mu.Lock()
	hold, held := b.hold, b.held
	if hold != nil {
		b.held = nil
	}
	b.mu.Unlock()
	if hold != nil {
		if held != nil {
			close(held)
		}
		<-hold
	}
	up := b.dial()
	if up == nil {
		return
	}
	defer up.Close()
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, up)
}
