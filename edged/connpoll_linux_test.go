package edged

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestPollerWakesInArrivalOrder: connections that become readable while their
// goroutines wait are served in the order their data arrived. (The runtime's own
// poller runs such a batch last-first: this test fails against it.)
func TestPollerWakesInArrivalOrder(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector shuffles the run queue on purpose; the order is tested without it")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p, err := newConnPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	const n = 8
	clients := make([]net.Conn, n)
	servers := make([]*pollConn, n)
	for i := range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		pc, ok := p.adopt(s).(*pollConn)
		if !ok {
			t.Fatal("the poller did not adopt a TCP connection")
		}
		defer pc.Close()
		clients[i], servers[i] = c, pc
	}

	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i, s := range servers {
		wg.Go(func() {
			if _, err := s.Read(make([]byte, 8)); err != nil {
				t.Error(err)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
	}
	// Wait until every reader is parked in the poller.
	for deadline := time.Now().Add(5 * time.Second); ; {
		parked := 0
		for _, s := range servers {
			if s.r.state.Load() == wpWaiting {
				parked++
			}
		}
		if parked == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d readers parked after 5s", parked, n)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)

	// All the writes happen before the poller runs: with one P, it runs only
	// once this goroutine waits.
	for i, c := range clients {
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(order, want) {
		t.Fatalf("readers ran in order %v; want the order their data arrived, %v", order, want)
	}
}

// TestPollerClose: closing the poller closes the connections it still holds, so a
// goroutine waiting on one returns.
func TestPollerClose(t *testing.T) {
	p, err := newConnPoller()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	pc := p.adopt(s)
	errc := make(chan error, 1)
	go func() {
		_, err := pc.Read(make([]byte, 8))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	p.close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("read on a connection of a closed poller succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read still blocked 5s after the poller closed")
	}
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	s2, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := p.adopt(s2); got != s2 {
		t.Fatal("a closed poller adopted a connection")
	}
}

// TestYieldGoesAfterReady: a writer that took its turn (writeTurn) runs again only
// after the connections that became ready meanwhile.
func TestYieldGoesAfterReady(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector shuffles the run queue on purpose; the order is tested without it")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p, err := newConnPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns [2]*pollConn
	var clients [2]net.Conn
	for i := range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		conns[i], clients[i] = p.adopt(s).(*pollConn), c
		defer conns[i].Close()
	}
	writer, reader := conns[0], conns[1]

	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	record := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	wg.Go(func() {
		if _, err := reader.Read(make([]byte, 8)); err != nil {
			t.Error(err)
		}
		record("reader")
	})
	for reader.r.state.Load() != wpWaiting {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)

	// The reader's data arrives first; then the writer yields. One poller round
	// sees both, and the reader must go first.
	if _, err := clients[1].Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		p.yield(&writer.w)
		record("writer")
	})
	wg.Wait()
	if want := []string{"reader", "writer"}; !slices.Equal(order, want) {
		t.Fatalf("ran in order %v; want %v", order, want)
	}
}

// TestWriteTurns: a write longer than writeTurn yields between turns and still
// delivers every byte in order, also across several Write calls.
func TestWriteTurns(t *testing.T) {
	p, err := newConnPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server := p.adopt(s).(*pollConn)
	defer server.Close()

	data := make([]byte, 5*writeTurn+123)
	for i := range data {
		data[i] = byte(i * 13)
	}
	errc := make(chan error, 1)
	go func() {
		for _, part := range [][]byte{data[:writeTurn/3], data[writeTurn/3 : 3*writeTurn], data[3*writeTurn:]} {
			if _, err := server.Write(part); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("bytes written in turns arrived changed")
	}
}
