package edged

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// trackingListener remembers the connections that have not sent a byte yet.
//
// fasthttp counts a new connection as active from the moment it is accepted, so a
// connection a client opened but never used (Go's and browsers' transports dial
// spare connections) would hold a graceful shutdown until its request timed out. At
// shutdown, closeUnused closes those; connections that carry a request are left to finish.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

func newTrackingListener(ln net.Listener) *trackingListener {
	return &trackingListener{Listener: ln, conns: map[*trackedConn]struct{}{}}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

// closeUnused closes every connection that has not sent a byte.
func (l *trackingListener) closeUnused() {
	l.mu.Lock()
	var unused []*trackedConn
	for c := range l.conns {
		if !c.used.Load() {
			unused = append(unused, c)
		}
	}
	l.mu.Unlock()
	for _, c := range unused {
		_ = c.Close()
	}
}

// closeAll closes every connection still open: those that outlived the shutdown timeout.
func (l *trackingListener) closeAll() {
	l.mu.Lock()
	open := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		open = append(open, c)
	}
	l.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// closeUnusedUntil calls closeUnused every interval until done is closed.
func (l *trackingListener) closeUnusedUntil(done <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		l.closeUnused()
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

type trackedConn struct {
	net.Conn
	l      *trackingListener
	used   atomic.Bool
	closed atomic.Bool
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.used.Load() {
		c.used.Store(true)
	}
	return n, err
}

func (c *trackedConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
