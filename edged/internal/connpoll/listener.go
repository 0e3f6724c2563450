package connpoll

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener hands out connections that wait in the poller and enforce the request
// timeout themselves. Create it with NewListener; Stop it once nothing serves its
// connections any more.
type Listener struct {
	net.Listener
	p       *poller       // nil: raw socket I/O in the runtime's poller (tests)
	timeout time.Duration // the request timeout; 0: none
	slack   time.Duration // how much later than asked a request deadline may fall
	now     atomic.Pointer[time.Time]
	stop    chan struct{} // closed by Stop; nil without a timeout
	once    sync.Once
}

// NewListener wraps ln: every TCP connection it accepts is moved to a poller of its
// own, and must send each whole request within requestTimeout (0: no limit) of
// connecting or of the end of the previous response; past it, a read returns a
// timeout error, which fasthttp turns into closing an idle keep-alive connection or a
// 408. The timeout is enforced at most Lateness(requestTimeout) after it passes.
// NewListener fails outside Linux, or when the kernel refuses an epoll instance.
func NewListener(ln net.Listener, requestTimeout time.Duration) (*Listener, error) {
	p, err := newPoller()
	if err != nil {
		return nil, err
	}
	return newListener(ln, p, requestTimeout), nil
}

func newListener(ln net.Listener, p *poller, timeout time.Duration) *Listener {
	l := &Listener{Listener: ln, p: p, timeout: timeout}
	if timeout > 0 {
		l.slack = min(deadlineSlack, timeout/4)
		now := time.Now()
		l.now.Store(&now)
		l.stop = make(chan struct{})
		go l.runClock()
	}
	return l
}

// Lateness is how long after requestTimeout passes a Listener's connection may still
// be waiting for a request: the deadline slack plus a tick of the request clock.
func Lateness(requestTimeout time.Duration) time.Duration {
	return min(deadlineSlack, requestTimeout/4) + clockTick
}

// Accept waits for the next connection and moves it to the poller. A connection the
// poller cannot take (not TCP, or its socket cannot be duplicated) stays in the
// runtime's poller, with raw socket I/O when it is TCP.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pc := &conn{Conn: c, l: l}
	if l.p != nil {
		pc.Conn = l.p.adopt(c)
	}
	if pc.Conn == c {
		pc.rio = newRawIO(c)
	}
	return pc, nil
}

// Stop closes the connections the poller still holds and stops the poller and the
// request clock. Call it after the server stopped serving the listener (its Close
// only stops accepting).
func (l *Listener) Stop() {
	l.once.Do(func() {
		if l.p != nil {
			l.p.close()
		}
		if l.stop != nil {
			close(l.stop)
		}
	})
}

// clockTick is how often the clock that request deadlines are computed from advances.
const clockTick = 100 * time.Millisecond

// runClock advances l.now every clockTick until Stop. A request deadline needs the
// time once per request; reading it from here instead of time.Now (two vDSO clock
// reads, each a slow TSC read on a VM) is about 2% of a cached small response's cost.
func (l *Listener) runClock() {
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

// deadlineSlack is how much later than asked a request deadline may fall (a quarter of
// the request timeout when that is less). Moving the runtime's timer on every request
// costs timer-heap work; within the slack the deadline already set is kept, and a new
// one is set slack beyond the one asked, so the next second of requests keeps it too.
// A deadline is never earlier than asked.
const deadlineSlack = time.Second

// conn is an accepted connection: in the poller (a *pollConn), or a TCP connection
// with raw socket I/O, or any other connection as it came.
type conn struct {
	net.Conn
	l *Listener
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

// armRequestDeadline enforces the request timeout: a request must have arrived in
// full within it of the end of the previous response (or of the accept). Read calls
// it on the first read after a write. The clock lags by up to clockTick, which the
// deadline adds back.
func (c *conn) armRequestDeadline() error {
	c.waiting = true
	return c.setReadDeadline(c.l.now.Load().Add(c.l.timeout+clockTick), c.l.slack)
}

// SetReadDeadline sets the read deadline exactly, as net.Conn does; only the request
// deadlines the connection sets itself are coalesced.
func (c *conn) SetReadDeadline(t time.Time) error {
	return c.setReadDeadline(t, 0)
}

// setReadDeadline sets a read deadline no earlier than t and at most slack later,
// keeping the one in force when it qualifies.
func (c *conn) setReadDeadline(t time.Time, slack time.Duration) error {
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

func (c *conn) SetDeadline(t time.Time) error {
	c.readDeadline = time.Time{}
	if err := c.Conn.SetDeadline(t); err != nil {
		return err
	}
	c.readDeadline = t
	return nil
}

func (c *conn) Read(p []byte) (int, error) {
	if !c.waiting && c.l.timeout > 0 {
		if err := c.armRequestDeadline(); err != nil {
			return 0, err
		}
	}
	if c.rio != nil {
		return c.rio.read(p)
	}
	return c.Conn.Read(p)
}

func (c *conn) Write(p []byte) (int, error) {
	c.waiting = false
	if c.rio != nil {
		return c.rio.write(p)
	}
	return c.Conn.Write(p)
}
