package connpoll

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawIO reads and writes a TCP connection's non-blocking socket with raw system
// calls, waiting in the runtime's network poller (syscall.RawConn) when the socket
// is not ready.
//
// Why: a plain net.Conn read or write enters the scheduler's blocking-syscall path.
// On loopback a write also runs the receiver's side of TCP and wakes it, which takes
// long enough that sysmon, seeing the P in a syscall with goroutines queued, hands the
// P to another thread; the writer then finds its P gone and parks. Under wrk that
// churn (sysmon wake-ups, futex hand-offs) cost more CPU than edged's handler. A
// non-blocking socket call never blocks, so it can run as ordinary work on its P.
//
// Like fasthttp, callers read from one goroutine at a time and write from one goroutine
// at a time (a read and a write may overlap).
type rawIO struct {
	rc         syscall.RawConn
	local      net.Addr
	remote     net.Addr
	rbuf, wbuf []byte
	rn, wn     int
	rerr, werr syscall.Errno
	readFn     func(uintptr) bool // bound once: no allocation per call
	writeFn    func(uintptr) bool
}

// tcpRawConn returns c as a TCP connection with its raw connection; ok is false for
// any other connection.
func tcpRawConn(c net.Conn) (tc *net.TCPConn, rc syscall.RawConn, ok bool) {
	if tc, ok = c.(*net.TCPConn); !ok {
		return nil, nil, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, nil, false
	}
	return tc, rc, true
}

// newRawIO returns the raw I/O of c, or nil when c is not a TCP connection.
func newRawIO(c net.Conn) *rawIO {
	_, rc, ok := tcpRawConn(c)
	if !ok {
		return nil
	}
	r := &rawIO{rc: rc, local: c.LocalAddr(), remote: c.RemoteAddr()}
	r.readFn, r.writeFn = r.doRead, r.doWrite
	return r
}

func (r *rawIO) read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.rbuf, r.rn, r.rerr = p, 0, 0
	err := r.rc.Read(r.readFn)
	n, errno := r.rn, r.rerr
	r.rbuf = nil
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, r.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (r *rawIO) doRead(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.rbuf[0])), uintptr(len(r.rbuf)))
		switch e {
		case 0:
			r.rn = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			r.rerr = e
			return true
		}
	}
}

func (r *rawIO) write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.wbuf, r.wn, r.werr = p, 0, 0
	err := r.rc.Write(r.writeFn)
	n, errno := r.wn, r.werr
	r.wbuf = nil
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, r.opError("write", errno)
	}
	return n, nil
}

func (r *rawIO) doWrite(fd uintptr) bool {
	for r.wn < len(r.wbuf) {
		rest := r.wbuf[r.wn:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch e {
		case 0:
			r.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.werr = e
			return true
		}
	}
	return true
}

// opError is the error net.Conn's Read and Write would give for errno.
func (r *rawIO) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: r.local, Addr: r.remote, Err: os.NewSyscallError(op, errno)}
}
