package edged

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ceilingServer answers every request on its connections with the same bytes and
// does nothing else: one thread, one epoll instance, a read and a write per request,
// no parsing beyond finding each request's end. Given the bytes edged sends for an
// object, its req/s under wrk is the most this client, kernel and machine allow for
// that response: the ceiling that both nginx and edged are measured against.
//
// It serves responses of at most a socket buffer (a write that would block is not
// retried), which is what it is for: the small objects.
type ceilingServer struct {
	addr      string
	lfd, epfd int
	response  []byte
	stop      atomic.Bool
	done      chan struct{}
}

// requestEnd is what ends a request without a body, as wrk sends them.
var requestEnd = []byte("\r\n\r\n")

// startCeiling opens a ceiling server's socket, to answer with the bytes of edged's
// response to a GET of path on addr with Host host. It serves only between start and
// stopServing: its thread must not live beside edged's, since with GOMAXPROCS=1 a goroutine
// blocked in epoll_wait holds the only P until sysmon takes it back, which stalled
// edged's requests for up to 15 ms.
func startCeiling(b testing.TB, addr, host, path string) *ceilingServer {
	b.Helper()
	s := &ceilingServer{response: rawResponse(b, addr, host, path)}
	var err error
	if s.lfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(s.lfd) })
	if err := unix.Bind(s.lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		b.Fatal(err)
	}
	if err := unix.Listen(s.lfd, 1024); err != nil {
		b.Fatal(err)
	}
	sa, err := unix.Getsockname(s.lfd)
	if err != nil {
		b.Fatal(err)
	}
	s.addr = (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}).String()
	if s.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(s.epfd) })
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, s.lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(s.lfd)}); err != nil {
		b.Fatal(err)
	}
	return s
}

// start serves on a thread of its own until stopServing.
func (s *ceilingServer) start() {
	s.stop.Store(false)
	s.done = make(chan struct{})
	go s.loop()
}

// stopServing ends the serving started by start and closes its connections.
func (s *ceilingServer) stopServing() {
	s.stop.Store(true)
	<-s.done
}

func (s *ceilingServer) loop() {
	runtime.LockOSThread() // exits with the goroutine
	defer close(s.done)
	matched := map[int]int{} // per connection: bytes of requestEnd matched so far
	defer func() {
		for fd := range matched {
			unix.Close(fd)
		}
	}()
	events := make([]unix.EpollEvent, 128)
	buf := make([]byte, 16<<10)
	for !s.stop.Load() {
		n, err := unix.EpollWait(s.epfd, events, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		for _, ev := range events[:max(n, 0)] {
			fd := int(ev.Fd)
			if fd == s.lfd {
				for {
					c, _, err := unix.Accept4(s.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
					if err != nil {
						break
					}
					_ = unix.SetsockoptInt(c, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
					if unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, c, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(c)}) != nil {
						unix.Close(c)
						continue
					}
					matched[c] = 0
				}
				continue
			}
			if !s.serve(fd, buf, matched) {
				delete(matched, fd)
				unix.Close(fd)
			}
		}
	}
}

// serve reads what fd has and writes response once per request that ended in it; it
// returns false when the connection is done. Reads and writes are raw system calls,
// as edged's are: the ceiling must not pay the scheduler's hooks that edged avoids.
func (s *ceilingServer) serve(fd int, buf []byte, matched map[int]int) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		switch {
		case e == syscall.EAGAIN:
			return true
		case e == syscall.EINTR:
			continue
		case e != 0 || n == 0:
			return false
		}
		m := matched[fd]
		for _, c := range buf[:n] {
			switch {
			case c == requestEnd[m]:
				m++
			case c == requestEnd[0]:
				m = 1
			default:
				m = 0
			}
			if m == len(requestEnd) {
				m = 0
				w, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&s.response[0])), uintptr(len(s.response)))
				if e != 0 || int(w) != len(s.response) {
					return false
				}
			}
		}
		matched[fd] = m
		if int(n) < len(buf) {
			return true
		}
	}
}

// rawResponse returns the bytes of the response to a GET of path on addr with Host
// host, exactly as they came.
func rawResponse(b testing.TB, addr, host, path string) []byte {
	b.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")); err != nil {
		b.Fatal(err)
	}
	var got bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if head, body, ok := bytes.Cut(got.Bytes(), requestEnd); ok {
			if want := contentLength(head); want >= 0 && len(body) >= want {
				return got.Bytes()
			}
		}
		if err != nil {
			b.Fatalf("read the response to GET %s from %s: %v (%d bytes)", path, addr, err, got.Len())
		}
	}
}

// contentLength returns the Content-Length in a response head, or -1.
func contentLength(head []byte) int {
	for _, line := range bytes.Split(head, []byte("\r\n")) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(name, []byte("Content-Length")) {
			if n, err := strconv.Atoi(string(bytes.TrimSpace(value))); err == nil {
				return n
			}
		}
	}
	return -1
}

// TestCeilingServer: the benchmark's ceiling server answers each request with edged's
// response, byte for byte, also when requests come pipelined or split across writes.
func TestCeilingServer(t *testing.T) {
	cas := newTestStore()
	ctl := newFakeControld(t)
	r := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
	v := ctl.set(feedSite("demo", []string{hostA}, r))
	e := startEdge(t, testConfig(t, ctl), cas)
	e.waitVersion(t, v)
	const path = "/dists/stable/InRelease"
	want := rawResponse(t, e.addr, hostA, path)
	if !bytes.HasPrefix(want, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(want, r.object("dists/stable/InRelease")) {
		t.Fatalf("edged's response to GET %s:\n%s", path, want)
	}
	cs := startCeiling(t, e.addr, hostA, path)
	cs.start()
	defer cs.stopServing()

	conn, err := net.Dial("tcp", cs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + hostA + "\r\n\r\n"
	// Two requests in one write, then one split inside its "\r\n\r\n".
	for _, part := range []string{req + req, req[:len(req)-3], req[len(req)-3:]} {
		if _, err := conn.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 3*len(want))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("read three responses: %v", err)
	}
	if !bytes.Equal(got, bytes.Repeat(want, 3)) {
		t.Fatalf("the ceiling server's responses differ from edged's")
	}
}
