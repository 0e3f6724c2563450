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
// spare connections) would hold a graceful shutdown until ReadTimeout. At shutdown,
// closeUnused closes those; connections that carry a request are left to finish.
// Its connections also coalesce read deadlines (see deadlineSlack).
type trackingListener struct {
	net.Listener
	p     *connPoller // nil: connections stay with the runtime's poller
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

func newTrackingListener(ln net.Listener, p *connPoller) *trackingListener {
	return &trackingListener{Listener: ln, p: p, conns: map[*trackedConn]struct{}{}}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	if l.p != nil {
		tc.Conn = l.p.adopt(c)
	}
	if tc.Conn == c {
		tc.rio = newRawIO(c)
	}
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
	// readDeadline is the read deadline last set on Conn (zero: none); only the
	// goroutine serving the connection sets deadlines.
	readDeadline time.Time
	rio          *rawIO // nil: Conn's own Read and Write
}

// deadlineSlack is how much later than asked a read deadline may fall. fasthttp sets
// a fresh read deadline (now + timeout) twice per request; moving the runtime's timer
// each time costs clock reads and timer-heap work on every request. Within the slack,
// the deadline already set is kept; a new one is set slack beyond the one asked, so
// the next second of requests keeps it too. A deadline is never earlier than asked.
const deadlineSlack = time.Second

func (c *trackedConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && !c.readDeadline.IsZero() && !c.readDeadline.Before(t) && c.readDeadline.Sub(t) <= deadlineSlack {
		return nil
	}
	if !t.IsZero() {
		t = t.Add(deadlineSlack)
	}
	c.readDeadline = time.Time{}
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	c.readDeadline = t
	return nil
}

func (c *trackedConn) SetDeadline(t time.Time) error {
	c.readDeadline = time.Time{}
	if err := c.Conn.SetDeadline(t); err != nil {
		return err
	}
	c.readDeadline = t
	return nil
}

func (c *trackedConn) Read(p []byte) (n int, err error) {
	if c.rio != nil {
		n, err = c.rio.read(p)
	} else {
		n, err = c.Conn.Read(p)
	}
	if n > 0 && !c.used.Load() {
		c.used.Store(true)
	}
	return n, err
}

func (c *trackedConn) Write(p []byte) (int, error) {
	if c.rio != nil {
		return c.rio.write(p)
	}
	return c.Conn.Write(p)
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
