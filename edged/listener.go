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
//
// Its connections also enforce the request timeout (see armRequestDeadline).
type trackingListener struct {
	net.Listener
	p       *connPoller   // nil: connections stay with the runtime's poller
	timeout time.Duration // Config.RequestTimeout; 0: none
	slack   time.Duration // how much later than asked a read deadline may fall
	now     atomic.Pointer[time.Time]
	stop    chan struct{} // closed by stopClock
	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
}

// newTrackingListener wraps ln. With a timeout it starts the clock its connections
// read; stopClock stops it once no connection is served any more.
func newTrackingListener(ln net.Listener, p *connPoller, timeout time.Duration) *trackingListener {
	l := &trackingListener{Listener: ln, p: p, timeout: timeout, conns: map[*trackedConn]struct{}{}}
	if timeout > 0 {
		l.slack = min(deadlineSlack, timeout/4)
		now := time.Now()
		l.now.Store(&now)
		l.stop = make(chan struct{})
		go l.runClock()
	}
	return l
}

// clockTick is how often the clock that request deadlines are computed from advances.
const clockTick = 100 * time.Millisecond

// runClock advances l.now every clockTick until stopClock. A request deadline needs
// the time once per request; reading it from here instead of time.Now (two vDSO clock
// reads, each a slow TSC read on a VM) is about 2% of a cached small response's cost.
func (l *trackingListener) runClock() {
	t := time.NewTicker(clockTick)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			now := time.Now()
			l.now.Store(&now)
		}
	}
}

func (l *trackingListener) stopClock() {
	if l.stop != nil {
		close(l.stop)
	}
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
	// Only the goroutine serving the connection reads, writes and sets deadlines, so
	// the fields below need no lock.
	//
	// readDeadline is the read deadline last set on Conn (zero: none).
	readDeadline time.Time
	// waiting is true from the first read of a request until the response is written:
	// the request's deadline is set.
	waiting bool
	rio     *rawIO // nil: Conn's own Read and Write
}

// deadlineSlack is how much later than asked a read deadline may fall (a quarter of
// the request timeout when that is less). Moving the runtime's timer on every request
// costs timer-heap work; within the slack the deadline already set is kept, and a new
// one is set slack beyond the one asked, so the next second of requests keeps it too.
// A deadline is never earlier than asked.
const deadlineSlack = time.Second

// armRequestDeadline enforces Config.RequestTimeout: a request must have arrived in
// full within it of the end of the previous response (or of the accept). Read calls it
// on the first read after a write. fasthttp's own ReadTimeout and IdleTimeout stay
// unset, since fasthttp would read the clock twice per request to move them. When the
// deadline passes, fasthttp sees a timeout error: an idle keep-alive connection is
// closed, and a new connection or a request read in part gets 408. The clock lags by
// up to clockTick, which the deadline adds back.
func (c *trackedConn) armRequestDeadline() error {
	c.waiting = true
	return c.setReadDeadline(c.l.now.Load().Add(c.l.timeout+clockTick), c.l.slack)
}

func (c *trackedConn) SetReadDeadline(t time.Time) error {
	return c.setReadDeadline(t, deadlineSlack)
}

func (c *trackedConn) setReadDeadline(t time.Time, slack time.Duration) error {
	if !t.IsZero() && !c.readDeadline.IsZero() && !c.readDeadline.Before(t) && c.readDeadline.Sub(t) <= slack {
		return nil
	}
	if !t.IsZero() {
		t = t.Add(slack)
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
	if !c.waiting && c.l.timeout > 0 {
		if err := c.armRequestDeadline(); err != nil {
			return 0, err
		}
	}
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
	c.waiting = false
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
