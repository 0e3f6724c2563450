package cdn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
)

func TestPaths(t *testing.T) {
	got := Paths([]string{"dists/stable/InRelease", "dists/stable/main/binary-amd64/Packages.xz",
		"dists/stable/main/binary-amd64/by-hash/SHA256/ab", "pool/main/h/hello/hello_1_amd64.deb"})
	want := []string{"/", "/dists/", "/dists/stable/", "/dists/stable/InRelease", "/dists/stable/main/",
		"/dists/stable/main/binary-amd64/", "/dists/stable/main/binary-amd64/Packages.xz",
		"/dists/stable/main/binary-amd64/by-hash/", "/dists/stable/main/binary-amd64/by-hash/SHA256/",
		"/pool/", "/pool/main/", "/pool/main/h/", "/pool/main/h/hello/"}
	if !slices.Equal(got, want) {
		t.Fatalf("Paths:\n got  %q\n want %q", got, want)
	}
}

// FuzzPaths: whatever paths come, the URLs are sorted, distinct, absolute, and never
// an immutable object.
func FuzzPaths(f *testing.F) {
	f.Add("dists/stable/InRelease\npool/main/h/h.deb")
	f.Add("")
	f.Fuzz(func(t *testing.T, list string) {
		out := Paths(strings.Split(list, "\n"))
		if !slices.IsSorted(out) || len(slices.Compact(slices.Clone(out))) != len(out) {
			t.Fatalf("not sorted and distinct: %q", out)
		}
		for _, u := range out {
			if !strings.HasPrefix(u, "/") || (!strings.HasSuffix(u, "/") && Immutable(u[1:])) {
				t.Fatalf("bad URL %q", u)
			}
		}
	})
}

// fakeCDN records the purge requests it gets; it fails while failing is set.
type fakeCDN struct {
	mu      sync.Mutex
	got     []string // "METHOD host path header"
	failing atomic.Bool
}

func (c *fakeCDN) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.got = append(c.got, fmt.Sprintf("%s %s %s %s", r.Method, r.Host, r.URL.Path, r.Header.Get("Fastly-Key")))
	c.mu.Unlock()
	if c.failing.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}
}

func (c *fakeCDN) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// post signs and POSTs ev to the purger.
func post(t *testing.T, p *Purger, secret string, ev api.HookPayload) int {
	t.Helper()
	body, _ := json.Marshal(ev)
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set(api.HeaderHookSignature, api.SignHook(secret, body))
	w := httptest.NewRecorder()
	p.ServeHTTP(w, req)
	return w.Code
}

// TestPurger: a signed activation is purged once the edges serve it; an unsigned one
// is refused; a failed purge is a 502 (controld retries); a list cut before pool/
// bans, one cut within pool/ need not; a key change purges the keyrings.
func TestPurger(t *testing.T) {
	var cdn fakeCDN
	target := httptest.NewServer(&cdn)
	defer target.Close()
	var version atomic.Uint64
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"status":"ok","routes_version":%d}`, version.Load())
	}))
	defer edge.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // an edge that does not answer: not waited for
	p, err := New(Config{Secret: "s", Targets: []string{target.URL}, Edges: []string{edge.URL, gone.URL}, Wait: 5 * time.Second,
		Headers: http.Header{"Fastly-Key": {"k"}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := api.HookPayload{Event: api.EventActivate, Repository: "demo", Hostnames: []string{"apt.a.test", "apt.b.test"},
		RoutesVersion: 7, ChangedPaths: []string{"dists/stable/InRelease"}}

	if code := post(t, p, "wrong", ev); code != http.StatusUnauthorized || len(cdn.requests()) != 0 {
		t.Fatalf("a bad signature: %d, %q", code, cdn.requests())
	}
	version.Store(6)
	go func() {
		time.Sleep(300 * time.Millisecond)
		version.Store(7)
	}()
	start := time.Now()
	if code := post(t, p, "s", ev); code != http.StatusNoContent {
		t.Fatalf("activation: %d", code)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Fatal("purged before the edge served routes version 7")
	}
	want := []string{"PURGE apt.a.test / k", "PURGE apt.a.test /dists/ k", "PURGE apt.a.test /dists/stable/ k", "PURGE apt.a.test /dists/stable/InRelease k",
		"PURGE apt.b.test / k", "PURGE apt.b.test /dists/ k", "PURGE apt.b.test /dists/stable/ k", "PURGE apt.b.test /dists/stable/InRelease k"}
	if got := cdn.requests(); !slices.Equal(got, want) {
		t.Fatalf("purges:\n got  %q\n want %q", got, want)
	}

	cdn.failing.Store(true)
	if code := post(t, p, "s", ev); code != http.StatusBadGateway {
		t.Fatalf("a failing CDN: %d", code)
	}
	cdn.failing.Store(false)

	for _, tt := range []struct {
		name    string
		changed []string
		ban     bool
	}{
		{"cut within dists/", []string{"dists/stable/InRelease", "dists/stable/Release"}, true},
		{"cut within pool/", []string{"dists/stable/InRelease", "pool/main/a/a.deb"}, false},
	} {
		cdn.mu.Lock()
		cdn.got = nil
		cdn.mu.Unlock()
		cut := ev
		cut.ChangedPaths, cut.ChangedPathsTruncated, cut.Hostnames = tt.changed, true, []string{"apt.a.test"}
		if code := post(t, p, "s", cut); code != http.StatusNoContent {
			t.Fatalf("%s: %d", tt.name, code)
		}
		banned := slices.Contains(cdn.requests(), "BAN apt.a.test / k")
		if banned != tt.ban {
			t.Fatalf("%s: banned %v, want %v: %q", tt.name, banned, tt.ban, cdn.requests())
		}
	}

	cdn.mu.Lock()
	cdn.got = nil
	cdn.mu.Unlock()
	key := api.HookPayload{Event: api.EventKey, Repository: "demo", Hostnames: []string{"apt.a.test"}, RoutesVersion: 7}
	if code := post(t, p, "s", key); code != http.StatusNoContent {
		t.Fatalf("key: %d", code)
	}
	want = []string{"PURGE apt.a.test / k", "PURGE apt.a.test /demo-archive-keyring.gpg k", "PURGE apt.a.test /demo-archive-keyring.asc k"}
	if got := cdn.requests(); !slices.Equal(got, want) {
		t.Fatalf("key purges: %q", got)
	}
	if code := post(t, p, "s", api.HookPayload{Event: api.EventRecord, Repository: "demo"}); code != http.StatusNoContent {
		t.Fatalf("record: %d", code)
	}

	// {host}: each purge goes to the hostname itself.
	p2, _ := New(Config{Secret: "s", Targets: []string{"http://{host}"}, Client: &http.Client{Transport: &http.Transport{
		Proxy: func(*http.Request) (*url.URL, error) { return url.Parse(target.URL) }}}})
	cdn.mu.Lock()
	cdn.got = nil
	cdn.mu.Unlock()
	if code := post(t, p2, "s", key); code != http.StatusNoContent || len(cdn.requests()) != 3 {
		t.Fatalf("{host}: %d %q", code, cdn.requests())
	}
}
