package edged

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/store"
)

// TestGracefulShutdown: cancelling Serve's context lets an in-flight request finish,
// over either poller.
func TestGracefulShutdown(t *testing.T) {
	for _, poller := range []string{"go", "edged"} {
		t.Run(poller, func(t *testing.T) { testGracefulShutdown(t, poller) })
	}
}

func testGracefulShutdown(t *testing.T, poller string) {
	cas := newTestStore()
	ctl := newFakeControld(t)
	tree := aptTree("demo", 1)
	big := bytes.Repeat([]byte("x"), 200<<10)
	tree["pool/main/b/big/big_1_amd64.deb"] = big
	r := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree)
	v := ctl.set(feedSite("demo", []string{hostA}, r))
	cfg := testConfig(t, ctl)
	cfg.StreamThreshold = 64 * KiB
	cfg.ConnPoller = poller
	e := startEdge(t, cfg, cas)
	e.waitVersion(t, v)

	cas.delay.Store(int64(300 * time.Millisecond))
	type result struct {
		status int
		body   []byte
	}
	done := make(chan result)
	go func() {
		resp, body := get(t, e.addr, "GET", hostA, "/pool/main/b/big/big_1_amd64.deb")
		done <- result{resp.StatusCode, body}
	}()
	time.Sleep(100 * time.Millisecond)
	stopped := make(chan struct{})
	go func() { e.stop(); close(stopped) }()
	res := <-done
	if res.status != 200 || !bytes.Equal(res.body, big) {
		t.Fatalf("in-flight request during shutdown: status %d, %d bytes", res.status, len(res.body))
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("edge did not stop")
	}
	if _, err := net.DialTimeout("tcp", e.addr, time.Second); err == nil {
		t.Fatal("listener still accepts after shutdown")
	}
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestRun: the whole daemon over a local-directory rclone store.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	rc, err := store.OpenRclone(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	cas := &testStore{Store: rc, opens: map[string]int{}}
	ctl := newFakeControld(t)
	a := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
	ctl.set(feedSite("demo", []string{hostA}, a))
	cfg := testConfig(t, ctl)
	cfg.Store = dir
	cfg.Listen, cfg.AdminListen = freeAddr(t), freeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg, testLogger(t)) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body := tryGet(cfg.Listen, hostA, "/dists/stable/InRelease")
		if resp == 200 && bytes.Equal(body, a.object("dists/stable/InRelease")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run did not serve InRelease within 10s (last status %d)", resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, body := get(t, cfg.Listen, "GET", hostA, "/pool/main/h/hello/hello_1_amd64.deb")
	wantStatus(t, "pool file from the rclone store", resp, body, 200)
	resp, body = get(t, cfg.AdminListen, "GET", "localhost", "/healthz")
	wantStatus(t, "healthz", resp, body, 200)
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// tryGet is get without failing the test: status 0 when the edge is not up yet.
func tryGet(addr, host, path string) (int, []byte) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, nil
	}
	conn.Close()
	return getStatus(addr, host, path)
}

// TestShutdownTimeoutClosesConnections: a request still being served when the shutdown
// timeout ends has its connection closed, so Serve returns then and no handler outlives
// it by more than a failed write, with either poller.
func TestShutdownTimeoutClosesConnections(t *testing.T) {
	for _, poller := range []string{"go", "edged"} {
		t.Run(poller, func(t *testing.T) {
			cas := newTestStore()
			ctl := newFakeControld(t)
			tree := aptTree("demo", 1)
			tree["pool/main/b/big/big_1_amd64.deb"] = bytes.Repeat([]byte("x"), 200<<10)
			r := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree)
			v := ctl.set(feedSite("demo", []string{hostA}, r))
			cfg := testConfig(t, ctl)
			cfg.StreamThreshold = 64 * KiB
			cfg.ConnPoller = poller
			cfg.ShutdownTimeout = duration.Duration(300 * time.Millisecond)
			e, err := New(cfg, cas, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- e.Serve(ctx, ln) }()
			go e.Sync(ctx)
			deadline := time.Now().Add(10 * time.Second)
			for e.Version() != v {
				if time.Now().After(deadline) {
					t.Fatal("the edge did not load its routes")
				}
				time.Sleep(10 * time.Millisecond)
			}

			// The store answers the big object only after 3 s: far past the timeout.
			cas.delay.Store(int64(3 * time.Second))
			reqErr := make(chan error, 1)
			go func() {
				conn, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					reqErr <- err
					return
				}
				defer conn.Close()
				fmt.Fprintf(conn, "GET /pool/main/b/big/big_1_amd64.deb HTTP/1.1\r\nHost: %s\r\n\r\n", hostA)
				_, err = io.Copy(io.Discard, conn)
				reqErr <- err
			}()
			time.Sleep(100 * time.Millisecond)
			start := time.Now()
			cancel()
			select {
			case err := <-served:
				if err == nil {
					t.Error("Serve returned nil although a request outlived the shutdown timeout")
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Serve did not return within 2 s of a 300 ms shutdown timeout")
			}
			select {
			case <-reqErr:
				if took := time.Since(start); took > 2*time.Second {
					t.Errorf("the request's connection was closed %s after shutdown began; want about the 300 ms timeout", took)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the in-flight request's connection was still open 2 s after a 300 ms shutdown timeout")
			}
		})
	}
}
