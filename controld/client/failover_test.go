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
