package edged

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/duration"
)

// TestControldDown: the last known routes keep being served, and a flip made while
// the edge could not see it is picked up once controld is back.
func TestControldDown(t *testing.T) {
	f := newFixture(t)
	inA := f.a.object("dists/stable/InRelease")
	f.ctl.stop()
	polls := f.ctl.polls.Load()
	time.Sleep(300 * time.Millisecond)
	for range 3 {
		resp, body := get(t, f.edge.addr, "GET", hostA, "/dists/stable/InRelease")
		wantStatus(t, "controld down", resp, body, 200)
		if !bytes.Equal(body, inA) {
			t.Fatalf("controld down: body %q", body)
		}
	}
	if got := f.ctl.polls.Load(); got != polls {
		t.Fatalf("controld answered %d polls while stopped", got-polls)
	}
	if m := scrape(t, f.edge.admin); !strings.Contains(m, "armor_edge_routes_poll_errors_total") || strings.Contains(m, "armor_edge_routes_poll_errors_total 0\n") {
		t.Fatal("poll errors not counted while controld is down")
	}
}

// TestRestartFromDisk: an edge restarted while controld is down routes from its state
// directory; with the store down too, it still routes (known paths 503, unknown 404).
func TestRestartFromDisk(t *testing.T) {
	cas := newTestStore()
	ctl := newFakeControld(t)
	a := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
	b := makeRelease(t, cas, "other", "2026-11-20T10:00:00Z", aptTree("other", 7))
	cfg := testConfig(t, ctl)
	e1 := startEdge(t, cfg, cas)
	e1.waitVersion(t, ctl.set(feedSite("demo", []string{hostA}, a), feedSite("other", []string{hostB}, b)))
	r2 := makeRelease(t, cas, "demo", "2026-11-21T10:00:00Z", aptTree("demo", 2))
	v := ctl.set(feedSite("demo", []string{hostA}, r2, a), feedSite("other", []string{hostB}, b))
	e1.waitVersion(t, v)
	e1.stop()
	ctl.stop()

	kept, err := os.ReadDir(filepath.Join(cfg.StateDir, "manifests"))
	if err != nil || len(kept) != 3 {
		t.Fatalf("state directory keeps %d manifests (%v); want 3", len(kept), err)
	}
	e2 := startEdge(t, cfg, cas)
	if e2.Version() != v {
		t.Fatalf("restarted edge serves version %d; want %d from disk", e2.Version(), v)
	}
	resp, body := get(t, e2.addr, "GET", hostA, "/dists/stable/InRelease")
	wantStatus(t, "after restart", resp, body, 200)
	if !bytes.Equal(body, r2.object("dists/stable/InRelease")) {
		t.Fatalf("after restart: %q", body)
	}
	oldPk := a.object("dists/stable/main/binary-amd64/Packages")
	resp, body = get(t, e2.addr, "GET", hostA, "/dists/stable/main/binary-amd64/by-hash/SHA256/"+sha(oldPk))
	wantStatus(t, "retained by-hash after restart", resp, body, 200)
	e2.stop()

	// Neither controld nor the store: routing still works from disk.
	cas.down.Store(true)
	e3 := startEdge(t, cfg, cas)
	if e3.Version() != v {
		t.Fatalf("edge restarted without store serves version %d; want %d", e3.Version(), v)
	}
	resp, body = get(t, e3.addr, "GET", hostB, "/dists/stable/Release")
	wantStatus(t, "known path, store down", resp, body, 503)
	resp, body = get(t, e3.addr, "GET", hostB, "/dists/stable/Nope")
	wantStatus(t, "unknown path, store down", resp, body, 404)
	resp, body = get(t, e3.addr, "HEAD", hostB, "/dists/stable/Release")
	wantStatus(t, "HEAD of a known path, store down", resp, body, 503)
}

// TestStoreDown: cached objects are served; misses get 503 with Retry-After.
func TestStoreDown(t *testing.T) {
	f := newFixture(t)
	// InRelease was pre-warmed; fetch a pool file once so it is cached too.
	deb := "/pool/main/h/hello/hello_1_amd64.deb"
	resp, body := get(t, f.edge.addr, "GET", hostA, deb)
	wantStatus(t, "warm", resp, body, 200)
	f.store.down.Store(true)
	for _, p := range []string{"/dists/stable/InRelease", deb} {
		resp, body := get(t, f.edge.addr, "GET", hostA, p)
		wantStatus(t, "cached "+p, resp, body, 200)
	}
	stats := f.store.statCount()
	for _, p := range []string{"/dists/stable/InRelease", deb} {
		resp, body := get(t, f.edge.addr, "HEAD", hostA, p)
		wantStatus(t, "HEAD of cached "+p, resp, body, 200)
	}
	if n := f.store.statCount() - stats; n != 0 {
		t.Fatalf("HEAD of cached objects asked the store %d times", n)
	}
	for _, method := range []string{"GET", "HEAD"} {
		resp, body = get(t, f.edge.addr, method, hostB, "/pool/main/h/hello/hello_7_amd64.deb")
		wantStatus(t, method+" miss with the store down", resp, body, 503)
		if resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: 503 without Retry-After", method)
		}
	}
	f.store.down.Store(false)
	for _, method := range []string{"HEAD", "GET"} {
		resp, body = get(t, f.edge.addr, method, hostB, "/pool/main/h/hello/hello_7_amd64.deb")
		wantStatus(t, method+" miss with the store back", resp, body, 200)
		if n := f.b.object("pool/main/h/hello/hello_7_amd64.deb"); resp.ContentLength != int64(len(n)) {
			t.Fatalf("%s: Content-Length %d; want %d", method, resp.ContentLength, len(n))
		}
	}
}

// TestHeadLargeObject: HEAD of an object streamed from the store (never cached) asks
// the store too, and answers 503 while it is down, 502 when it holds other bytes.
func TestHeadLargeObject(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.StreamThreshold = 8 })
	const p = "/pool/main/h/hello/hello_1_amd64.deb"
	resp, body := get(t, f.edge.addr, "HEAD", hostA, p)
	wantStatus(t, "HEAD of a streamed object", resp, body, 200)
	f.store.damaged.Store(sha(f.a.object(p[1:])), []byte("short"))
	resp, body = get(t, f.edge.addr, "HEAD", hostA, p)
	wantStatus(t, "HEAD of a damaged object", resp, body, 502)
	f.store.damaged.Delete(sha(f.a.object(p[1:])))
	f.store.down.Store(true)
	resp, body = get(t, f.edge.addr, "HEAD", hostA, p)
	wantStatus(t, "HEAD with the store down", resp, body, 503)
}

// TestHealthz: /healthz says ok only while controld's feed and the store both answer;
// with either out it answers 503 "degraded", naming which, while the edge keeps serving.
func TestHealthz(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Poll.StaleAfter = duration.Duration(300 * time.Millisecond) })
	type report struct {
		Status   string
		Controld struct {
			OK          bool
			LastSuccess *time.Time `json:"last_success"`
			Error       string
		}
		Store struct {
			OK    bool
			Error string
		}
	}
	health := func(want int) report {
		t.Helper()
		resp, body := get(t, f.edge.admin, "GET", "localhost", "/healthz")
		var r report
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("healthz body %q: %v", body, err)
		}
		if resp.StatusCode != want {
			t.Fatalf("healthz: %d %s; want %d", resp.StatusCode, body, want)
		}
		return r
	}
	if r := health(200); r.Status != "ok" || !r.Controld.OK || !r.Store.OK || r.Controld.LastSuccess == nil {
		t.Fatalf("healthy edge: %+v", r)
	}

	f.store.down.Store(true)
	if r := health(503); r.Status != "degraded" || !r.Controld.OK || r.Store.OK || !strings.Contains(r.Store.Error, "connection refused") {
		t.Fatalf("store down: %+v", r)
	}
	f.store.down.Store(false)
	health(200)

	f.ctl.stop()
	time.Sleep(500 * time.Millisecond)
	if r := health(503); r.Status != "degraded" || r.Controld.OK || r.Controld.Error == "" || !r.Store.OK {
		t.Fatalf("controld down: %+v", r)
	}
	f.store.down.Store(true)
	if r := health(503); r.Status != "degraded" || r.Controld.OK || r.Store.OK {
		t.Fatalf("controld and store down: %+v", r)
	}
	resp, body := get(t, f.edge.addr, "GET", hostA, "/dists/stable/InRelease")
	wantStatus(t, "cached InRelease with both down", resp, body, 200)
}

// TestStoreDamaged: an object whose bytes do not match its digest is answered 502 and
// not cached.
func TestStoreDamaged(t *testing.T) {
	f := newFixture(t)
	const p = "/pool/main/h/hello/hello_1_amd64.deb"
	sum := sha(f.a.object(p[1:]))
	for _, bad := range [][]byte{[]byte("other bytes"), append([]byte("x"), f.a.object(p[1:])...)} {
		f.store.damaged.Store(sum, bad)
		resp, body := get(t, f.edge.addr, "GET", hostA, p)
		wantStatus(t, "damaged object", resp, body, 502)
	}
	f.store.damaged.Delete(sum)
	resp, body := get(t, f.edge.addr, "GET", hostA, p)
	wantStatus(t, "intact object", resp, body, 200)
	if !bytes.Equal(body, f.a.object(p[1:])) {
		t.Fatalf("body %q", body)
	}
}

// TestBadToken: controld refusing the token leaves the edge without routes, and says so.
func TestBadToken(t *testing.T) {
	cas := newTestStore()
	ctl := newFakeControld(t)
	a := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
	ctl.set(feedSite("demo", []string{hostA}, a))
	cfg := testConfig(t, ctl)
	cfg.Token = "wrong"
	e := startEdge(t, cfg, cas)
	time.Sleep(200 * time.Millisecond)
	if e.Version() != 0 {
		t.Fatalf("edge with a refused token serves version %d", e.Version())
	}
	resp, body := get(t, e.addr, "GET", hostA, "/dists/stable/InRelease")
	wantStatus(t, "no routes yet", resp, body, 503)
	resp, body = get(t, e.admin, "GET", "localhost", "/healthz")
	wantStatus(t, "healthz without routes", resp, body, 503)
}

func TestTokenFromEnvAndFile(t *testing.T) {
	ctl := newFakeControld(t)
	cas := newTestStore()
	a := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
	v := ctl.set(feedSite("demo", []string{hostA}, a))

	t.Run("env", func(t *testing.T) {
		t.Setenv(TokenEnv, ctl.token)
		cfg := testConfig(t, ctl)
		cfg.Token = ""
		startEdge(t, cfg, cas).waitVersion(t, v)
	})
	t.Run("file", func(t *testing.T) {
		t.Setenv(TokenEnv, "")
		cfg := testConfig(t, ctl)
		cfg.Token = ""
		cfg.TokenFile = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(cfg.TokenFile, []byte(ctl.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		startEdge(t, cfg, cas).waitVersion(t, v)
	})
	t.Run("none", func(t *testing.T) {
		t.Setenv(TokenEnv, "")
		cfg := testConfig(t, ctl)
		cfg.Token = ""
		if _, err := New(cfg, cas, nil); err == nil || !strings.Contains(err.Error(), TokenEnv) {
			t.Fatalf("New without a token: %v; want an error naming %s", err, TokenEnv)
		}
	})
}

func TestAccessLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	f := newFixture(t, func(c *Config) { c.AccessLog = logPath })
	get(t, f.edge.addr, "GET", hostA, "/dists/stable/InRelease")
	get(t, f.edge.addr, "GET", hostA, "/nope")
	fh, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var statuses []float64
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("access log line %q: %v", sc.Text(), err)
		}
		if rec["host"] != hostA || rec["method"] != "GET" {
			t.Errorf("access log record %v", rec)
		}
		statuses = append(statuses, rec["status"].(float64))
	}
	if len(statuses) != 2 || statuses[0] != 200 || statuses[1] != 404 {
		t.Fatalf("access log statuses %v; want [200 404]", statuses)
	}
}
