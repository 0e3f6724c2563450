package connpoll

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// poller waits for the readiness of the public listener's connections on an epoll
// instance of its own, and wakes their goroutines in the order the kernel reported
// them ready.
//
// Why: the runtime's poller hands back each batch of ready goroutines in reverse
// order (netpoll collects them with gList.push). Under load a batch holds most of
// the connections, so the request that arrived first is answered last, up to two
// batch times after it arrived; that ordering is what put edged's p99 above nginx's,
// which serves epoll's ready list first in, first out. Here the runtime waits on one
// file, the epoll instance; when it is readable, the poller goroutine drains it and
// wakes the connections in the kernel's order.
//
// The poller owns each adopted connection's socket outright: adopt duplicates the
// descriptor and closes the runtime's, so no event reaches the runtime's poller twice.
type poller struct {
	epfd   int
	epfile *os.File        // epfd, waited on in the runtime's poller (never call its Fd)
	rc     syscall.RawConn // epfile's

	mu     sync.Mutex
	conns  map[uint64]*pollConn
	nextID uint64
	closed bool

	// yielders are writers that took their turn (see writeTurn) and wait for the
	// next round; kickfd, an eventfd in the epoll set, starts one.
	yielders []*waitPoint
	kickfd   int
	kicked   atomic.Bool

	// Used only by the poller goroutine.
	events []unix.EpollEvent
	woken  []*waitPoint
	done   chan struct{}

	closeOnce sync.Once
}

// newPoller starts a poller; close stops it.
func newPoller() (*poller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	// Non-blocking, so that os.NewFile registers it with the runtime's poller.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	kick, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	kev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET} // id 0
	if err := unix.EpollCtl(fd, unix.EPOLL_CTL_ADD, kick, &kev); err != nil {
		unix.Close(kick)
		unix.Close(fd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	f := os.NewFile(uintptr(fd), "epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		unix.Close(kick)
		return nil, err
	}
	p := &poller{
		epfd:   fd,
		epfile: f,
		kickfd: kick,
		rc:     rc,
		conns:  map[uint64]*pollConn{},
		events: make([]unix.EpollEvent, 128),
		done:   make(chan struct{}),
	}
	go p.run()
	return p, nil
}

func (p *poller) run() {
	defer close(p.done)
	// Read returns when epfile is closed (poll never reports done), or when the
	// runtime cannot wait on it: then nothing would wake the connections, so they
	// are closed and no more are adopted.
	_ = p.rc.Read(p.poll)
	p.closeConns()
}

// poll drains the epoll instance, records each connection's readiness and wakes the
// goroutines waiting for it in the order the kernel reported them. It returns false:
// wait for the instance to be readable again.
func (p *poller) poll(epfd uintptr) bool {
	for {
		// epoll_pwait with no signal mask: every architecture has it.
		n, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, epfd,
			uintptr(unsafe.Pointer(&p.events[0])), uintptr(len(p.events)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			break // not expected while RawConn.Read holds epfile; wake what was found
		}
		p.mu.Lock()
		for _, ev := range p.events[:n] {
			id := eventID(&ev)
			if id == 0 {
				var buf [8]byte
				_, _, _ = syscall.RawSyscall(syscall.SYS_READ, uintptr(p.kickfd), uintptr(unsafe.Pointer(&buf[0])), 8)
				p.kicked.Store(false)
				continue
			}
			c := p.conns[id]
			if c == nil {
				continue // closed since the event was queued
			}
			if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				c.hup.Store(true) // before the wake-up, which Read may then skip
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 && c.r.notify() {
				p.woken = append(p.woken, &c.r)
			}
			if ev.Events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 && c.w.notify() {
				p.woken = append(p.woken, &c.w)
			}
		}
		p.mu.Unlock()
		if int(n) < len(p.events) {
			break
		}
	}
	// Writers that took their turn go after the connections that became ready.
	p.mu.Lock()
	for _, w := range p.yielders {
		if w.notify() {
			p.woken = append(p.woken, w)
		}
	}
	clear(p.yielders)
	p.yielders = p.yielders[:0]
	p.mu.Unlock()
	wakeInOrder(p.woken)
	clear(p.woken)
	p.woken = p.woken[:0]
	return false
}

// wakeInOrder wakes the goroutines waiting at ws so that they run in ws's order. A
// channel send puts the goroutine it wakes in the P's next-to-run slot, moving the one
// there to the tail of the run queue, so the first is woken last.
func wakeInOrder(ws []*waitPoint) {
	if len(ws) == 0 {
		return
	}
	for _, w := range ws[1:] {
		w.wake <- struct{}{}
	}
	ws[0].wake <- struct{}{}
}

func eventID(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// adopt moves c's socket to the poller. When c is not TCP, or its socket cannot be
// moved, it returns c unchanged.
func (p *poller) adopt(c net.Conn) net.Conn {
	tc, rc, ok := tcpRawConn(c)
	if !ok {
		return c
	}
	fd := -1
	if err := rc.Control(func(s uintptr) {
		fd, _ = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil || fd < 0 {
		return c
	}
	pc := &pollConn{p: p, fd: fd, local: c.LocalAddr(), remote: c.RemoteAddr()}
	pc.r.wake = make(chan struct{}, 1)
	pc.w.wake = make(chan struct{}, 1)
	pc.rdl.wake = func() { pc.wakeNow(&pc.r) }
	pc.wdl.wake = func() { pc.wakeNow(&pc.w) }
	// Under mu, so that close cannot release epfd in between.
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		unix.Close(fd)
		return c
	}
	p.nextID++
	pc.id = p.nextID
	ev := unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET,
		Fd:     int32(uint32(pc.id)),
		Pad:    int32(uint32(pc.id >> 32)),
	}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		p.mu.Unlock()
		unix.Close(fd)
		return c
	}
	p.conns[pc.id] = pc
	p.mu.Unlock()
	// The duplicate keeps the socket open; closing c only takes it out of the runtime.
	_ = tc.Close()
	return pc
}

func (p *poller) forget(c *pollConn) {
	p.mu.Lock()
	delete(p.conns, c.id)
	p.mu.Unlock()
}

// close stops the poller and closes the connections still open.
func (p *poller) close() {
	if p == nil {
		return
	}
	p.closeOnce.Do(func() {
		p.closeConns()
		_ = p.epfile.Close()
		<-p.done
		p.mu.Lock() // no yield is writing to kickfd
		unix.Close(p.kickfd)
		p.mu.Unlock()
	})
}

// closeConns stops adopting connections and closes those held.
func (p *poller) closeConns() {
	p.mu.Lock()
	p.closed = true
	open := make([]*pollConn, 0, len(p.conns))
	for _, c := range p.conns {
		open = append(open, c)
	}
	p.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// writeTurn is how much a connection writes before the connections that became
// ready meanwhile go first (as nginx's sendfile_max_chunk, smaller).
//
// Why turns: without them a writer goes on until its socket buffer is full, and TCP
// autotuning gives some connections much smaller buffers than others. Under load
// each wait for buffer space costs a whole round of the other connections, and in
// that round each of them writes a whole large response; so the connections with
// small buffers got a small share, and their requests made the latency tail.
//
// Why 56 KiB: a turn should reach the client as one segment, and the kernel builds
// segments of at most 64 KiB (loopback's MSS is 65483; TSO and GSO stop at 64 KiB
// too). Larger turns arrive as bursts that fill the receive buffers of a busy client:
// its windows close, the sender's loss probes then retransmit data that had arrived,
// and a few responses stall. 64 KiB turns end in a 53-byte runt segment and served
// fewer requests than 56 KiB; 32 KiB and less cost more in turns than they gain.
// docs/benchmarks.md has the measurements (6f0cad6).
const writeTurn = 56 << 10

// yield parks w's writer until the poller's next round, after the connections
// ready by then. On a closed poller (its connections closed) it returns at once.
func (p *poller) yield(w *waitPoint) {
	p.mu.Lock() // also keeps close from releasing kickfd under the write below
	if p.closed {
		p.mu.Unlock()
		return
	}
	for {
		s := w.state.Load()
		if s != wpWaiting && w.state.CompareAndSwap(s, wpWaiting) {
			break // an edge it held is not lost: the writer tries the socket next
		}
	}
	p.yielders = append(p.yielders, w)
	if !p.kicked.Swap(true) {
		one := uint64(1)
		_, _, _ = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(p.kickfd), uintptr(unsafe.Pointer(&one)), 8)
	}
	p.mu.Unlock()
	<-w.wake
}

// waitPoint is where one direction (read or write) of a connection waits for the
// poller. Its state is idle, ready (an edge came since the goroutine last looked) or
// waiting (the goroutine is parked on wake).
type waitPoint struct {
	state atomic.Int32
	wake  chan struct{} // capacity 1: one token per waiting→idle transition
}

const (
	wpIdle int32 = iota
	wpReady
	wpWaiting
)

// notify records an edge; it reports whether a goroutine is waiting, in which case
// the caller must send it the wake token.
func (w *waitPoint) notify() bool {
	for {
		switch w.state.Load() {
		case wpReady:
			return false
		case wpIdle:
			if w.state.CompareAndSwap(wpIdle, wpReady) {
				return false
			}
		case wpWaiting:
			if w.state.CompareAndSwap(wpWaiting, wpIdle) {
				return true
			}
		}
	}
}

// reset forgets an edge; the goroutine calls it before it tries the socket, so only
// edges that come after the attempt end the next park.
func (w *waitPoint) reset() { w.state.CompareAndSwap(wpReady, wpIdle) }

// park waits for the next edge, or returns at once if one came since reset.
func (w *waitPoint) park() {
	if w.state.CompareAndSwap(wpIdle, wpWaiting) {
		<-w.wake
		return
	}
	w.state.Store(wpIdle)
}

// pollConn is a TCP connection whose socket the poller owns. Like fasthttp, callers
// read from one goroutine at a time and write from one goroutine at a time; Close
// and the deadline setters may come from any goroutine.
type pollConn struct {
	p             *poller
	id            uint64
	fd            int
	local, remote net.Addr

	// refs counts the system calls in progress on fd; closedBit marks it closed. The
	// descriptor is released when both say so, so a read never runs on a reused fd.
	refs atomic.Int64
	r, w waitPoint
	// turn counts the bytes written since the writer last waited or yielded, or the
	// reader last read (a new request starts a new turn: small responses never yield).
	turn atomic.Int64
	// drained says the last read was short: it left the socket empty, so Read waits
	// for the next edge instead of asking again (reader goroutine only). hup, set by
	// the poller, says the peer has closed or the socket failed; then Read always asks,
	// since that edge may have come before the short read and no other will follow.
	drained bool
	hup     atomic.Bool
	rdl     deadline
	wdl     deadline
}

const closedBit = 1 << 62

func (c *pollConn) acquire() bool {
	for {
		s := c.refs.Load()
		if s&closedBit != 0 {
			return false
		}
		if c.refs.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

func (c *pollConn) release() {
	if c.refs.Add(-1) == closedBit {
		c.destroy()
	}
}

func (c *pollConn) destroy() {
	c.p.forget(c)
	unix.Close(c.fd) // the only descriptor: this also takes it out of the epoll set
}

func (c *pollConn) Close() error {
	for {
		s := c.refs.Load()
		if s&closedBit != 0 {
			return c.opError("close", net.ErrClosed)
		}
		if c.refs.CompareAndSwap(s, s|closedBit) {
			if s == 0 {
				c.destroy()
			}
			break
		}
	}
	c.rdl.set(time.Time{})
	c.wdl.set(time.Time{})
	c.wakeNow(&c.r)
	c.wakeNow(&c.w)
	return nil
}

func (c *pollConn) closed() bool { return c.refs.Load()&closedBit != 0 }

// wakeNow ends w's wait from outside the poller (Close, a deadline).
func (c *pollConn) wakeNow(w *waitPoint) {
	if w.notify() {
		w.wake <- struct{}{}
	}
}

func (c *pollConn) Read(b []byte) (int, error) {
	if !c.acquire() {
		return 0, c.opError("read", net.ErrClosed)
	}
	defer c.release()
	if len(b) == 0 {
		return 0, nil
	}
	if c.rdl.expired.Load() { // as net.Conn: a passed deadline fails even with data waiting
		return 0, c.opError("read", os.ErrDeadlineExceeded)
	}
	for {
		// After a short read, a read now would most likely fail with EAGAIN: a
		// keep-alive client sends its next request only after this response. Every
		// byte that arrived since that read has sent an edge, so wait for one, as
		// nginx does. The reset before that read stays in force: an edge since then
		// ends the park at once.
		if c.drained && !c.hup.Load() {
			c.drained = false
			if err := c.waitErr("read", &c.rdl); err != nil {
				return 0, err
			}
			c.r.park()
		}
		c.r.reset()
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			if n == 0 {
				return 0, io.EOF
			}
			c.drained = int(n) < len(b)
			c.turn.Store(0)
			return int(n), nil
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
		default:
			return 0, c.opError("read", os.NewSyscallError("read", e))
		}
		// Checked after the attempt: a deadline or Close that came before reset has
		// set its flag by now; one that comes later wakes the park.
		if err := c.waitErr("read", &c.rdl); err != nil {
			return 0, err
		}
		c.r.park()
	}
}

func (c *pollConn) Write(b []byte) (int, error) {
	if !c.acquire() {
		return 0, c.opError("write", net.ErrClosed)
	}
	defer c.release()
	if c.wdl.expired.Load() {
		return 0, c.opError("write", os.ErrDeadlineExceeded)
	}
	written := 0
	for written < len(b) {
		if c.turn.Load() >= writeTurn {
			c.p.yield(&c.w)
			if c.closed() {
				return written, c.opError("write", net.ErrClosed)
			}
			c.turn.Store(0)
		}
		c.w.reset()
		rest := b[written:]
		if left := writeTurn - int(c.turn.Load()); len(rest) > left {
			rest = rest[:left]
		}
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch e {
		case 0:
			written += int(n)
			c.turn.Add(int64(n))
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
		default:
			return written, c.opError("write", os.NewSyscallError("write", e))
		}
		if err := c.waitErr("write", &c.wdl); err != nil {
			return written, err
		}
		c.w.park()
		c.turn.Store(0) // waiting for buffer space was a turn given up
	}
	return written, nil
}

// waitErr is why a wait must not start: the connection is closed or d has passed.
func (c *pollConn) waitErr(op string, d *deadline) error {
	switch {
	case c.closed():
		return c.opError(op, net.ErrClosed)
	case d.expired.Load():
		return c.opError(op, os.ErrDeadlineExceeded)
	}
	return nil
}

func (c *pollConn) LocalAddr() net.Addr  { return c.local }
func (c *pollConn) RemoteAddr() net.Addr { return c.remote }

func (c *pollConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *pollConn) SetReadDeadline(t time.Time) error {
	if c.closed() {
		return c.opError("set", net.ErrClosed)
	}
	c.rdl.set(t)
	return nil
}

func (c *pollConn) SetWriteDeadline(t time.Time) error {
	if c.closed() {
		return c.opError("set", net.ErrClosed)
	}
	c.wdl.set(t)
	return nil
}

// opError is the error net.Conn's methods would give.
func (c *pollConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}

// deadline is one direction's deadline: expired is set when it passes, and wake (set
// once, by adopt) is called after, so a goroutine waiting at that moment returns.
type deadline struct {
	mu      sync.Mutex
	at      time.Time // zero: none
	timer   *time.Timer
	wake    func()
	expired atomic.Bool
}

// set moves the deadline to t; the zero time removes it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	d.at = t
	d.expired.Store(false)
	if t.IsZero() {
		if d.timer != nil {
			d.timer.Stop()
		}
		d.mu.Unlock()
		return
	}
	wait := time.Until(t)
	if wait <= 0 {
		d.expired.Store(true)
		d.mu.Unlock()
		d.wake()
		return
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.fire)
	} else {
		d.timer.Reset(wait)
	}
	d.mu.Unlock()
}

// fire runs when the timer does; a timer set for an earlier deadline since moved
// finds the deadline not yet passed.
func (d *deadline) fire() {
	d.mu.Lock()
	passed := !d.at.IsZero() && !time.Now().Before(d.at)
	if passed {
		d.expired.Store(true)
	} else if !d.at.IsZero() {
		d.timer.Reset(time.Until(d.at)) // a wall-clock deadline the clock has not reached
	}
	d.mu.Unlock()
	if passed {
		d.wake()
	}
}
