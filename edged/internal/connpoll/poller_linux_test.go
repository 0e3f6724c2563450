package connpoll

import (
	"bytes"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testPoller starts a poller and a loopback listener; the test's end closes both.
func testPoller(t *testing.T) (*poller, net.Listener) {
	t.Helper()
	p, err := newPoller()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return p, ln
}

// acceptPair dials ln and returns the accepted end (not yet adopted) and the client end.
func acceptPair(t *testing.T, ln net.Listener) (server, client net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return server, client
}

// adoptedPair is acceptPair with the accepted end adopted by p.
func adoptedPair(t *testing.T, p *poller, ln net.Listener) (*pollConn, net.Conn) {
	t.Helper()
	s, c := acceptPair(t, ln)
	pc, ok := p.adopt(s).(*pollConn)
	if !ok {
		t.Fatal("the poller did not adopt a TCP connection")
	}
	t.Cleanup(func() { pc.Close() })
	return pc, c
}

// reaches reports whether w reaches state within timeout. It does not fail the test,
// so goroutines other than the test's may call it.
func reaches(w *waitPoint, state int32, timeout time.Duration) bool {
	for end := time.Now().Add(timeout); w.state.Load() != state; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// waitParked waits until the goroutines of ws are parked.
func waitParked(t *testing.T, ws ...*waitPoint) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for _, w := range ws {
		if !reaches(w, wpWaiting, time.Until(end)) {
			parked := 0
			for _, w := range ws {
				if w.state.Load() == wpWaiting {
					parked++
				}
			}
			t.Fatalf("%d of %d goroutines parked after 5s", parked, len(ws))
		}
	}
	time.Sleep(10 * time.Millisecond) // from the state change to the channel receive
}

// TestPollerWakesInArrivalOrder: connections that become readable while their
// goroutines wait are served in the order their data arrived. (The runtime's own
// poller runs such a batch last-first: this test fails against it.)
func TestPollerWakesInArrivalOrder(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector shuffles the run queue on purpose; the order is tested without it")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p, ln := testPoller(t)
	const n = 8
	clients := make([]net.Conn, n)
	servers := make([]*pollConn, n)
	for i := range n {
		servers[i], clients[i] = adoptedPair(t, p, ln)
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
	waits := make([]*waitPoint, n)
	for i, s := range servers {
		waits[i] = &s.r
	}
	waitParked(t, waits...)

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
// goroutine waiting on one returns; after it, nothing is adopted and nothing yields.
func TestPollerClose(t *testing.T) {
	p, ln := testPoller(t)
	s, _ := acceptPair(t, ln)
	pc := p.adopt(s)
	err := errAfter(t, "read after the poller closed", 20*time.Millisecond, p.close, func() error {
		_, err := pc.Read(make([]byte, 8))
		return err
	})
	if err == nil {
		t.Fatal("read on a connection of a closed poller succeeded")
	}
	s2, _ := acceptPair(t, ln)
	if got := p.adopt(s2); got != s2 {
		t.Fatal("a closed poller adopted a connection")
	}
	errAfter(t, "yield on a closed poller", 0, nil, func() error {
		w := waitPoint{wake: make(chan struct{}, 1)}
		p.yield(&w)
		return nil
	})
}

// TestYieldGoesAfterReady: a writer that took its turn (writeTurn) runs again only
// after the connections that became ready meanwhile.
func TestYieldGoesAfterReady(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector shuffles the run queue on purpose; the order is tested without it")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p, ln := testPoller(t)
	writer, _ := adoptedPair(t, p, ln)
	reader, readerClient := adoptedPair(t, p, ln)

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
	waitParked(t, &reader.r)

	// The reader's data arrives first; then the writer yields. One poller round
	// sees both, and the reader must go first.
	if _, err := readerClient.Write([]byte("x")); err != nil {
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
	p, ln := testPoller(t)
	server, client := adoptedPair(t, p, ln)

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

// TestReadWaitsAfterShortRead: after a read that left the socket empty, the next Read
// waits for the socket's next edge instead of first asking the kernel, which would
// answer EAGAIN: one read system call per request, not two. The calls are counted in
// this thread's syscr (/proc/thread-self/io); the goroutine is locked to its thread,
// which sleeps while it waits.
func TestReadWaitsAfterShortRead(t *testing.T) {
	p, ln := testPoller(t)
	pc, client := adoptedPair(t, p, ln)
	if err := pc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, 64)
	if _, err := client.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	// Once the poller has seen the first edge: were it seen after the read, it would
	// end the wait below at once, and Read would rightly ask the kernel again.
	if !reaches(&pc.r, wpReady, 5*time.Second) {
		t.Fatal("the poller did not see the first bytes within 5s")
	}
	if n, err := io.ReadAtLeast(pc, buf, len("first")); err != nil || n != len("first") {
		t.Fatalf("first read: %d bytes, %v", n, err)
	}
	go func() { // once Read waits (or has given up waiting for it), the next request
		reaches(&pc.r, wpWaiting, 5*time.Second)
		client.Write([]byte("second"))
	}()
	cost := -threadReads(t) + threadReads(t) // what one count costs
	before := threadReads(t)
	n, err := pc.Read(buf)
	reads := threadReads(t) - before - cost
	if err != nil || string(buf[:n]) != "second" {
		t.Fatalf("second read: %q, %v", buf[:n], err)
	}
	if reads != 1 {
		t.Errorf("the read after a short read made %d read system calls, want 1", reads)
	}
}

// threadReads is the number of read system calls this thread has made.
func threadReads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no syscr in /proc/thread-self/io:\n%s", b)
	return 0
}
