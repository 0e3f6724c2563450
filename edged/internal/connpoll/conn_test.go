package connpoll

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// deadlineConn records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	set []time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

// TestReadDeadlineCoalescing: a request deadline is never earlier than asked nor more
// than deadlineSlack later, and request deadlines that the one in force already
// satisfies do not reach the connection; SetReadDeadline sets exactly what it is asked.
func TestReadDeadlineCoalescing(t *testing.T) {
	base := time.Now()
	at := func(d time.Duration) time.Time { return base.Add(d) }
	tests := []struct {
		name  string
		calls []func(c *conn) error
		slack time.Duration // deadlineSlack: request deadlines; 0: SetReadDeadline
		asked []time.Time   // deadlines asked, in order
		sets  int           // how many reached the connection
	}{
		{"first deadline is set", nil, deadlineSlack, []time.Time{at(60 * time.Second)}, 1},
		{"later deadlines within the slack are kept", nil, deadlineSlack,
			[]time.Time{at(60 * time.Second), at(60*time.Second + 300*time.Millisecond), at(60*time.Second + 900*time.Millisecond)}, 1},
		{"a deadline past the one set moves it", nil, deadlineSlack,
			[]time.Time{at(60 * time.Second), at(62 * time.Second)}, 2},
		{"an earlier deadline moves it", nil, deadlineSlack,
			[]time.Time{at(60 * time.Second), at(30 * time.Second)}, 2},
		{"no deadline always reaches the connection", nil, deadlineSlack,
			[]time.Time{at(60 * time.Second), {}, at(60 * time.Second)}, 3},
		{"SetDeadline forgets the read deadline", []func(c *conn) error{
			func(c *conn) error { return c.setReadDeadline(at(60*time.Second), deadlineSlack) },
			func(c *conn) error { return c.SetDeadline(time.Time{}) },
		}, deadlineSlack, []time.Time{at(60 * time.Second)}, 3},
		{"SetReadDeadline is exact", nil, 0,
			[]time.Time{at(60 * time.Second), at(60*time.Second + 300*time.Millisecond), at(60 * time.Second)}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dc := &deadlineConn{}
			c := &conn{Conn: dc}
			for _, call := range tt.calls {
				if err := call(c); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range tt.asked {
				set := c.SetReadDeadline
				if tt.slack > 0 {
					set = func(d time.Time) error { return c.setReadDeadline(d, tt.slack) }
				}
				if err := set(d); err != nil {
					t.Fatal(err)
				}
				got := dc.set[len(dc.set)-1]
				switch {
				case d.IsZero() && !got.IsZero():
					t.Fatalf("asked no deadline; connection has %v", got)
				case !d.IsZero() && (got.Before(d) || got.Sub(d) > tt.slack):
					t.Fatalf("asked deadline %v; connection has %v (slack %v)", d.Sub(base), got.Sub(base), tt.slack)
				}
			}
			if len(dc.set) != tt.sets {
				t.Fatalf("%d deadlines reached the connection; want %d", len(dc.set), tt.sets)
			}
		})
	}
}

// TestConnIO: connections accepted by a Listener read and write like net.Conn,
// whether they wait in the poller or (when it cannot take them) in the runtime's
// poller with raw socket I/O: large writes to a slow reader complete, a read or write
// past its deadline is a timeout and a moved deadline is obeyed, a read after the peer
// closes is io.EOF, and a read or write blocked when the connection is closed returns.
func TestConnIO(t *testing.T) {
	own, err := newPoller()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.close)
	for _, mode := range []struct {
		name string
		p    *poller
	}{{"raw I/O in the runtime's poller", nil}, {"own poller", own}} {
		t.Run(mode.name, func(t *testing.T) { testConnIO(t, mode.p) })
	}
}

func testConnIO(t *testing.T, p *poller) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newListener(inner, p, 0)
	defer ln.Close()
	pair := func(t *testing.T) (server net.Conn, client net.Conn) {
		t.Helper()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		tc := server.(*conn)
		_, runtimeConn := tc.Conn.(*net.TCPConn)
		switch {
		case runtime.GOOS != "linux":
		case p == nil && tc.rio == nil:
			t.Fatal("accepted TCP connection does not use raw socket I/O on Linux")
		case p != nil && (runtimeConn || tc.rio != nil):
			t.Fatal("accepted TCP connection was not adopted by the poller")
		}
		t.Cleanup(func() { client.Close(); server.Close() })
		return server, client
	}

	t.Run("large write to a slow reader", func(t *testing.T) {
		server, client := pair(t)
		data := make([]byte, 16<<20)
		for i := range data {
			data[i] = byte(i * 7)
		}
		done := make(chan error, 1)
		go func() {
			n, err := server.Write(data)
			if err == nil && n != len(data) {
				err = fmt.Errorf("wrote %d of %d bytes", n, len(data))
			}
			done <- err
		}()
		time.Sleep(50 * time.Millisecond) // let the socket buffers fill
		got, err := io.ReadAll(io.LimitReader(client, int64(len(data))))
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("write: %v", err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, not the %d written", len(got), len(data))
		}
	})

	t.Run("read and EOF", func(t *testing.T) {
		server, client := pair(t)
		if _, err := client.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
			t.Fatal(err)
		}
		client.Close()
		got, err := io.ReadAll(server)
		if err != nil || string(got) != "GET / HTTP/1.1\r\n" {
			t.Fatalf("ReadAll = %q, %v", got, err)
		}
		if n, err := server.Read(make([]byte, 8)); n != 0 || err != io.EOF {
			t.Fatalf("read after EOF = %d, %v; want 0, io.EOF", n, err)
		}
	})

	t.Run("read deadline", func(t *testing.T) {
		server, _ := pair(t)
		if err := server.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		_, err := server.Read(make([]byte, 8))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read past the deadline: %v; want a timeout", err)
		}
	})

	t.Run("close while reading", func(t *testing.T) {
		server, _ := pair(t)
		err := errAfter(t, "read after Close", 20*time.Millisecond, func() { server.Close() }, func() error {
			_, err := server.Read(make([]byte, 8))
			return err
		})
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read on a closed connection: %v; want net.ErrClosed", err)
		}
	})

	t.Run("write to a reset connection", func(t *testing.T) {
		server, client := pair(t)
		client.(*net.TCPConn).SetLinger(0)
		client.Close()
		time.Sleep(20 * time.Millisecond)
		var err error
		for range 100 {
			if _, err = server.Write(make([]byte, 64<<10)); err != nil {
				break
			}
		}
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "write" {
			t.Fatalf("write to a reset connection: %v; want a *net.OpError from write", err)
		}
	})

	t.Run("write deadline", func(t *testing.T) {
		server, _ := pair(t)
		data := make([]byte, 64<<20)
		if err := server.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		// The client never reads: the socket buffers fill and the write waits.
		n, err := server.Write(data)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("write past the deadline: %d bytes, %v; want a timeout", n, err)
		}
		if n <= 0 || n >= 64<<20 {
			t.Fatalf("write past the deadline wrote %d bytes (%v); want part of the buffer", n, err)
		}
	})

	t.Run("deadline in the past", func(t *testing.T) {
		server, client := pair(t)
		if _, err := client.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		if err := server.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		var ne net.Error
		if _, err := server.Read(make([]byte, 8)); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read with a past deadline: %v; want a timeout", err)
		}
	})

	t.Run("deadline moved later", func(t *testing.T) {
		server, client := pair(t)
		if err := server.SetReadDeadline(time.Now().Add(30 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if err := server.SetReadDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(100 * time.Millisecond) // well past the first deadline
			_, _ = client.Write([]byte("late"))
		}()
		buf := make([]byte, 8)
		n, err := server.Read(buf)
		if err != nil || string(buf[:n]) != "late" {
			t.Fatalf("read after the deadline was lifted = %q, %v; want \"late\"", buf[:n], err)
		}
	})

	t.Run("short read with the end queued", func(t *testing.T) {
		server, client := pair(t)
		if _, err := client.Write([]byte("last")); err != nil {
			t.Fatal(err)
		}
		client.Close()
		time.Sleep(20 * time.Millisecond) // data and FIN queued, their edges gone by
		buf := make([]byte, 64)
		if n, err := server.Read(buf); err != nil || string(buf[:n]) != "last" {
			t.Fatalf("read = %q, %v", buf[:n], err)
		}
		err := errAfter(t, "read after the data", 0, nil, func() error {
			_, err := server.Read(buf)
			return err
		})
		if err != io.EOF {
			t.Fatalf("read after the data = %v; want io.EOF", err)
		}
	})

	t.Run("short read, then more data", func(t *testing.T) {
		server, client := pair(t)
		buf := make([]byte, 64)
		if _, err := client.Write([]byte("ab")); err != nil {
			t.Fatal(err)
		}
		if n, err := server.Read(buf); err != nil || string(buf[:n]) != "ab" {
			t.Fatalf("first read = %q, %v", buf[:n], err)
		}
		go func() {
			time.Sleep(20 * time.Millisecond)
			_, _ = client.Write([]byte("cd"))
		}()
		if n, err := server.Read(buf); err != nil || string(buf[:n]) != "cd" {
			t.Fatalf("read after a short read = %q, %v; want \"cd\"", buf[:n], err)
		}
		// Data that came between two reads is read at once.
		if _, err := client.Write([]byte("ef")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		if n, err := server.Read(buf); err != nil || string(buf[:n]) != "ef" {
			t.Fatalf("read of waiting data after a short read = %q, %v; want \"ef\"", buf[:n], err)
		}
		// A deadline still ends the wait.
		if err := server.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		var ne net.Error
		if _, err := server.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read past the deadline after a short read: %v; want a timeout", err)
		}
	})

	t.Run("close while writing", func(t *testing.T) {
		server, _ := pair(t)
		err := errAfter(t, "write after Close", 50*time.Millisecond, func() { server.Close() }, func() error {
			_, err := server.Write(make([]byte, 64<<20))
			return err
		})
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write on a closed connection: %v; want net.ErrClosed", err)
		}
	})

	t.Run("use after close", func(t *testing.T) {
		server, _ := pair(t)
		if err := server.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after Close: %v; want net.ErrClosed", err)
		}
		if _, err := server.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write after Close: %v; want net.ErrClosed", err)
		}
		if err := server.Close(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("second Close: %v; want net.ErrClosed", err)
		}
	})
}

// errAfter runs op in a goroutine, waits settle, calls then (if any) and returns op's
// error. It fails the test if op has not returned 5s after that; what names the wait.
func errAfter(t *testing.T, what string, settle time.Duration, then func(), op func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- op() }()
	time.Sleep(settle)
	if then != nil {
		then()
	}
	select {
	case err := <-errc:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting 5s later", what)
		return nil
	}
}

// TestRequestDeadline: a connection with a request timeout fails a read that waits
// past it, counted from the accept or from the end of the last write, at most
// Lateness later; requests that keep coming in time are never cut off.
func TestRequestDeadline(t *testing.T) {
	const timeout = 200 * time.Millisecond
	late := Lateness(timeout) + 500*time.Millisecond // and a scheduling margin
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := NewListener(inner, timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Stop()
	defer ln.Close()
	accept := func() (server, client net.Conn, at time.Time) {
		t.Helper()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		at = time.Now()
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { server.Close() })
		return server, client, at
	}
	timesOut := func(what string, server net.Conn, from time.Time) {
		t.Helper()
		_, err := server.Read(make([]byte, 8))
		took := time.Since(from)
		var ne net.Error
		switch {
		case !errors.As(err, &ne) || !ne.Timeout():
			t.Fatalf("%s: read = %v; want a timeout", what, err)
		case took < timeout || took > timeout+late:
			t.Fatalf("%s: timed out after %s; want between %s and %s", what, took, timeout, timeout+late)
		}
	}

	server, _, at := accept()
	timesOut("silent new connection", server, at)

	// Requests a third of the timeout apart, each answered, for three timeouts: the
	// deadline moves on with every response.
	server, client, at := accept()
	buf := make([]byte, 8)
	for i := range 9 {
		time.Sleep(timeout / 3)
		if _, err := client.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Read(buf); err != nil {
			t.Fatalf("request %d, %s after the accept: %v", i, time.Since(at), err)
		}
		if _, err := server.Write([]byte("a")); err != nil {
			t.Fatal(err)
		}
	}
	timesOut("idle after a response", server, time.Now())
}

// TestListenerStop: Stop closes the connections the poller holds, so a read waiting
// on one returns.
func TestListenerStop(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := NewListener(inner, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	err = errAfter(t, "read after Stop", 20*time.Millisecond, ln.Stop, func() error {
		_, err := server.Read(make([]byte, 8))
		return err
	})
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a connection of a stopped listener: %v; want net.ErrClosed", err)
	}
	ln.Stop() // a second Stop does nothing
}
