package edged

import (
	"bytes"
	"testing"
)

// TestControldReplicas: an edge given several controld replicas polls the next when one
// does not answer; when the replica it polls dies, the next flip reaches it through
// another one. A list with a URL that is not http(s) is refused, naming it.
func TestControldReplicas(t *testing.T) {
	cas := newTestStore()
	a, b := newFakeControld(t), newFakeControld(t)
	dead := newFakeControld(t)
	deadURL := dead.url()
	dead.stop()
	r1 := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
	va := a.set(feedSite("demo", []string{hostA}, r1))
	vb := b.set(feedSite("demo", []string{hostA}, r1))
	if va != vb {
		t.Fatalf("the replicas' feeds are at %d and %d", va, vb)
	}
	cfg := testConfig(t, a)
	cfg.Controld = deadURL + ", " + a.url() + "," + b.url()
	e := startEdge(t, cfg, cas)
	e.waitVersion(t, va)

	// a dies while the edge polls it; a flip on b (both replicas share the database, so
	// b's feed has it) reaches the edge.
	a.stop()
	r2 := makeRelease(t, cas, "demo", "2026-11-21T10:00:00Z", aptTree("demo", 2))
	e.waitVersion(t, b.set(feedSite("demo", []string{hostA}, r2)))
	resp, body := get(t, e.addr, "GET", hostA, "/dists/stable/InRelease")
	wantStatus(t, "after the replica it polled died", resp, body, 200)
	if !bytes.Equal(body, r2.object("dists/stable/InRelease")) {
		t.Errorf("after the replica it polled died: %q", body)
	}

	cfg.Controld = a.url() + ",ftp://x"
	if err := cfg.Validate(); err == nil || !bytes.Contains([]byte(err.Error()), []byte("ftp://x")) {
		t.Errorf("a list with ftp://x: %v, want an error naming it", err)
	}
}
