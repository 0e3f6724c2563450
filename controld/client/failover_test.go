package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/client"
)

// TestFailover: with several replicas, a request that gets no answer from one (a closed
// port) or 503 (its database is down) goes to the next, the client then keeps to the
// replica that answered, and an answer other than 503 is final.
func TestFailover(t *testing.T) {
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	var downHits, liveHits atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downHits.Add(1)
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":{"code":"unavailable","message":"database unreachable"}}`))
	}))
	defer down.Close()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		liveHits.Add(1)
		if strings.HasSuffix(r.URL.Path, "/nosuch") {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"code":"not_found","message":"repository nosuch: not found"}}`))
			return
		}
		w.Write([]byte(`{"name":"acme","hostnames":[],"keys":[]}`))
	}))
	defer live.Close()

	c := client.New(dead+", "+down.URL+","+live.URL+"/", "t", nil)
	r, err := c.Repo(context.Background(), "acme")
	if err != nil || r.Name != "acme" {
		t.Fatalf("through a dead replica and one answering 503: %v, %+v", err, r)
	}
	if c.URL() != live.URL || downHits.Load() != 1 {
		t.Errorf("client keeps to %s after %d hits on the 503 replica; want %s after 1", c.URL(), downHits.Load(), live.URL)
	}
	if _, err := c.Repo(context.Background(), "acme"); err != nil || downHits.Load() != 1 || liveHits.Load() != 2 {
		t.Errorf("second request: %v; the 503 replica was asked %d times, the live one %d", err, downHits.Load(), liveHits.Load())
	}
	if _, err := c.Repo(context.Background(), "nosuch"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("a 404 from the live replica: %v, want it as the answer", err)
	}

	// Every replica down: the error names the last one tried.
	c = client.New(dead+","+down.URL, "t", nil)
	if _, err := c.Repo(context.Background(), "acme"); err == nil || !strings.Contains(err.Error(), down.URL) {
		t.Errorf("all replicas down: %v, want an error naming %s", err, down.URL)
	}
}

// TestFailoverFrozen: a replica that accepts connections and never answers (a frozen
// process: its kernel completes the handshakes) holds a read for the read attempt only;
// the next replica answers and the client keeps to it. With one replica there is no
// next to ask, so no attempt bound applies.
func TestFailoverFrozen(t *testing.T) {
	frozen, err := net.Listen("tcp", "127.0.0.1:0") // never accepted: requests wait in its backlog
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"name":"acme","hostnames":[],"keys":[]}`))
	}))
	defer live.Close()

	c := client.New("http://"+frozen.Addr().String()+","+live.URL, "t", nil)
	client.SetReadAttempt(c, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	r, err := c.Repo(ctx, "acme")
	if took := time.Since(start); err != nil || r.Name != "acme" || took > 5*time.Second {
		t.Fatalf("read through a frozen replica: %v, %+v after %v; want the live replica's answer after about 300ms", err, r, took)
	}
	if c.URL() != live.URL {
		t.Errorf("client keeps to %s, want %s", c.URL(), live.URL)
	}

	one := client.New("http://"+frozen.Addr().String(), "t", nil)
	client.SetReadAttempt(one, 100*time.Millisecond)
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := one.Repo(ctx, "acme"); !errors.Is(err, context.DeadlineExceeded) || ctx.Err() == nil {
		t.Errorf("the only replica, frozen: %v; want it waited for until the caller's deadline", err)
	}
}
