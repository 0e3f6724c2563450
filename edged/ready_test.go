package edged

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/store"
)

// probe asks the admin listener for path and returns its status and report.
func probe(t *testing.T, admin, path string) (int, healthReport) {
	t.Helper()
	resp, body := get(t, admin, "GET", "localhost", path)
	var r healthReport
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%s body %q: %v", path, body, err)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("%s Cache-Control %q; want no-store", path, cc)
	}
	return resp.StatusCode, r
}

// wantProbes checks /healthz and /readyz both answer status with a report of that
// status, and returns the /readyz report.
func wantProbes(t *testing.T, admin string, status int, state string) healthReport {
	t.Helper()
	var last healthReport
	for _, path := range []string{"/healthz", "/readyz"} {
		got, r := probe(t, admin, path)
		if got != status || r.Status != state {
			t.Fatalf("%s: %d %+v; want %d %q", path, got, r, status, state)
		}
		last = r
	}
	return last
}

// TestReadyz: /readyz, beside /healthz, is 200 only while routes are loaded and the
// store and controld answer. A store that answers but no longer holds the routed
// releases (moved, emptied) is seen by both at the next request.
func TestReadyz(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Poll.StaleAfter = duration.Duration(300 * time.Millisecond) })
	wantProbes(t, f.edge.admin, 200, "ok")

	f.store.down.Store(true)
	if r := wantProbes(t, f.edge.admin, 503, "degraded"); r.Store.OK || !strings.Contains(r.Store.Error, "connection refused") {
		t.Fatalf("store down: %+v", r)
	}
	f.store.down.Store(false)
	wantProbes(t, f.edge.admin, 200, "ok")

	// The store answers, but lacks the active releases' manifests: both sites are asked
	// about in turn, and each probe sees it.
	f.store.gone.Store(true)
	for range 4 {
		r := wantProbes(t, f.edge.admin, 503, "degraded")
		if r.Store.OK || !strings.Contains(r.Store.Error, "moved or emptied") {
			t.Fatalf("store emptied: %+v", r)
		}
	}
	f.store.gone.Store(false)
	wantProbes(t, f.edge.admin, 200, "ok")

	f.ctl.stop()
	time.Sleep(500 * time.Millisecond)
	if r := wantProbes(t, f.edge.admin, 503, "degraded"); r.Controld.OK || !r.Store.OK {
		t.Fatalf("controld down: %+v", r)
	}
}

// TestReadyzCatchingUp: an edge started on routes from its state_dir serves them at
// once, but is not ready for a load balancer until its first poll has asked controld
// what is current (a client sent to it meanwhile could hold a newer InRelease from
// another edge and miss its by-hash indexes here). That first poll does not long-poll:
// with nothing new, the edge is ready at once, not after [poll] wait.
func TestReadyzCatchingUp(t *testing.T) {
	st, ctl := newTestStore(), newFakeControld(t)
	a := makeRelease(t, st, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
	cfg := testConfig(t, ctl)
	e := startEdge(t, cfg, st)
	e.waitVersion(t, ctl.set(feedSite("demo", []string{hostA}, a)))
	e.stop()

	b := makeRelease(t, st, "demo", "2026-11-21T10:00:00Z", aptTree("demo", 2))
	v := ctl.set(feedSite("demo", []string{hostA}, b, a))
	release := ctl.hold()
	e = startEdge(t, cfg, st)
	if code, body := getStatus(e.addr, hostA, "/dists/stable/InRelease"); code != 200 || !bytes.Equal(body, a.object("dists/stable/InRelease")) {
		t.Fatalf("restarted edge, controld not heard from: %d %q; want the InRelease of the routes on disk", code, body)
	}
	for range 3 {
		if code, r := probe(t, e.admin, "/readyz"); code != 503 || r.Status != "catching up" {
			t.Fatalf("/readyz before the first poll ended: %d %+v; want 503 catching up", code, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	release()
	e.waitVersion(t, v)
	waitReady(t, e.admin, 5*time.Second)
	e.stop()

	start := time.Now()
	e = startEdge(t, cfg, st) // nothing new: the first poll answers 304 at once
	waitReady(t, e.admin, 5*time.Second)
	if took := time.Since(start); took >= cfg.Poll.Wait.D() {
		t.Fatalf("ready after %v: the first poll waited like a long poll", took)
	}
}

// waitReady waits until /readyz answers 200.
func waitReady(t *testing.T, admin string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, r := probe(t, admin, "/readyz")
		if code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %+v after %v", code, r, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadyzNoRoutes: an edge that has loaded no routes is not ready.
func TestReadyzNoRoutes(t *testing.T) {
	ctl := newFakeControld(t)
	cfg := testConfig(t, ctl)
	cfg.Token = "wrong"
	e := startEdge(t, cfg, newTestStore())
	wantProbes(t, e.admin, 503, "no routes loaded")
}

// TestReadyzDraining: from the start of a graceful shutdown /readyz answers 503
// "shutting down" while a request in flight finishes; /healthz still reports the
// dependencies.
func TestReadyzDraining(t *testing.T) {
	f := newFixture(t)
	f.store.delay.Store(int64(time.Second))
	done := make(chan int, 1)
	go func() {
		st, _ := getStatus(f.edge.addr, hostA, "/pool/main/h/hello/hello_1_amd64.deb")
		done <- st
	}()
	time.Sleep(200 * time.Millisecond) // the request waits on the store
	f.edge.cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, r := probe(t, f.edge.admin, "/readyz")
		if st == 503 && r.Status == "shutting down" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz during shutdown: %d %+v", st, r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, r := probe(t, f.edge.admin, "/healthz"); st != 200 || r.Status != "ok" {
		t.Fatalf("/healthz during shutdown: %d %+v", st, r)
	}
	if st := <-done; st != 200 {
		t.Fatalf("the request in flight during shutdown got %d", st)
	}
}

// TestReadyzMovedStore: the whole daemon over a local-directory store; the directory
// is renamed while it runs, and both probes see it at once, then see it back.
func TestReadyzMovedStore(t *testing.T) {
	dir := t.TempDir() + "/store"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rc, err := store.OpenRclone(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	cas := &testStore{Store: rc, opens: map[string]int{}}
	ctl := newFakeControld(t)
	a := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
	v := ctl.set(feedSite("demo", []string{hostA}, a))
	cfg := testConfig(t, ctl)
	cfg.Store = dir
	cfg.Listen, cfg.AdminListen = freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg, testLogger(t)) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := testClient.Get("http://" + cfg.AdminListen + "/readyz"); err == nil {
			var r healthReport
			err = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if err == nil && resp.StatusCode == 200 && r.RoutesVersion == v {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("edge not ready within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	r := wantProbes(t, cfg.AdminListen, 503, "degraded")
	if !strings.Contains(r.Store.Error, a.sum) {
		t.Fatalf("moved store: the error does not name the missing manifest %s: %+v", a.sum, r)
	}
	if err := os.Rename(dir+".moved", dir); err != nil {
		t.Fatal(err)
	}
	wantProbes(t, cfg.AdminListen, 200, "ok")
}
