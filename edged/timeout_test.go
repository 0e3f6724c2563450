package edged

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/armor-apt/armor/edged/internal/connpoll"
	"github.com/armor-apt/armor/internal/duration"
)

// TestRequestTimeout: a client has RequestTimeout to send each whole request header,
// counted from connecting or from the end of the previous response, in both pollers.
// An idle keep-alive connection is closed; a new connection that sends nothing, or a
// request left incomplete, gets 408; and a client that keeps sending requests is never cut off.
func TestRequestTimeout(t *testing.T) {
	const timeout = 400 * time.Millisecond
	const margin = time.Second // for scheduling on a busy machine
	request := "GET /dists/stable/InRelease HTTP/1.1\r\nHost: " + hostA + "\r\n\r\n"

	for _, poller := range []string{"go", "edged"} {
		t.Run(poller, func(t *testing.T) {
			// fasthttp sets each deadline exactly; edged's poller may enforce it up
			// to connpoll.Lateness after.
			late := margin
			if poller == "edged" {
				late += connpoll.Lateness(timeout)
			}
			cas := newTestStore()
			ctl := newFakeControld(t)
			r := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
			v := ctl.set(feedSite("demo", []string{hostA}, r))
			cfg := testConfig(t, ctl)
			cfg.RequestTimeout = duration.Duration(timeout)
			cfg.ConnPoller = poller
			e := startEdge(t, cfg, cas)
			e.waitVersion(t, v)

			dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
				t.Helper()
				conn, err := net.Dial("tcp", e.addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close() })
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				return conn, bufio.NewReader(conn)
			}
			send := func(t *testing.T, conn net.Conn, s string) {
				t.Helper()
				if _, err := io.WriteString(conn, s); err != nil {
					t.Fatal(err)
				}
			}
			response := func(t *testing.T, br *bufio.Reader) *http.Response {
				t.Helper()
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("read response: %v", err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					t.Fatalf("read body: %v", err)
				}
				resp.Body.Close()
				return resp
			}
			// closedAfter waits for the server to close conn and checks when it did.
			closedAfter := func(t *testing.T, br *bufio.Reader, from time.Time) {
				t.Helper()
				n, err := io.Copy(io.Discard, br)
				took := time.Since(from)
				var ne net.Error
				switch {
				case errors.As(err, &ne) && ne.Timeout():
					t.Fatalf("connection still open %s after the timeout", time.Since(from))
				case n != 0:
					t.Fatalf("%d unexpected bytes before the close", n)
				case took < timeout:
					t.Fatalf("closed after %s, before the %s timeout", took, timeout)
				case took > timeout+late:
					t.Fatalf("closed after %s; want within %s of the %s timeout", took, late, timeout)
				}
			}

			// The subtests share the edge and run side by side.
			t.Run("idle keep-alive connection is closed", func(t *testing.T) {
				t.Parallel()
				conn, br := dial(t)
				// The server's idle time starts when it has written the response, which
				// is before this side has read it: count from before the request, so
				// that a close the server timed right is never seen as early.
				sent := time.Now()
				send(t, conn, request)
				if resp := response(t, br); resp.StatusCode != 200 {
					t.Fatalf("status %d; want 200", resp.StatusCode)
				}
				closedAfter(t, br, sent)
			})

			for _, tt := range []struct{ name, sent string }{
				{"incomplete request gets 408", "GET /dists/stable/InRelease HTTP/1.1\r\nHost: " + hostA + "\r\n"},
				{"silent new connection gets 408", ""},
			} {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					start := time.Now()
					conn, br := dial(t)
					send(t, conn, tt.sent)
					resp := response(t, br)
					took := time.Since(start)
					if resp.StatusCode != http.StatusRequestTimeout {
						t.Fatalf("status %d; want 408", resp.StatusCode)
					}
					if took < timeout || took > timeout+late {
						t.Fatalf("408 after %s; want between %s and %s", took, timeout, timeout+late)
					}
					if _, err := br.ReadByte(); err != io.EOF {
						t.Fatalf("after the 408: %v; want the connection closed", err)
					}
				})
			}

			t.Run("busy connection is kept", func(t *testing.T) {
				t.Parallel()
				// Requests a third of the timeout apart, for three timeouts: each
				// comes within the timeout of the previous response.
				conn, br := dial(t)
				start := time.Now()
				for i := 0; time.Since(start) < 3*timeout; i++ {
					send(t, conn, request)
					if resp := response(t, br); resp.StatusCode != 200 {
						t.Fatalf("request %d: status %d; want 200", i, resp.StatusCode)
					}
					time.Sleep(timeout / 3)
				}
			})
		})
	}
}

// TestRequestTimeoutConfig: request_timeout defaults to 60s and must not be negative.
func TestRequestTimeoutConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`controld = "http://c:1"`), "edged.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RequestTimeout.D() != 60*time.Second {
		t.Fatalf("request_timeout %s; want 60s by default", cfg.RequestTimeout)
	}
	path := t.TempDir() + "/edged.toml"
	if err := os.WriteFile(path, []byte("controld = \"http://c:1\"\nrequest_timeout = \"-1s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil {
		t.Fatal("request_timeout -1s accepted")
	}
}
