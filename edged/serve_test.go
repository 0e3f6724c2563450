package edged

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	hostA = "apt.example.test"
	hostB = "deb.other.test"
)

// fixture is two sites on one edge: demo at apt.example.test (and mirror.example.test)
// and other at deb.other.test.
type fixture struct {
	store *testStore
	ctl   *fakeControld
	edge  *testEdge
	a, b  *rel
}

func newFixture(t *testing.T, tweak ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{store: newTestStore(), ctl: newFakeControld(t)}
	f.a = makeRelease(t, f.store, "demo", "2026-11-20T10:00:00Z", aptTree("demo", 1))
	f.b = makeRelease(t, f.store, "other", "2026-11-20T10:00:00Z", aptTree("other", 7))
	v := f.ctl.set(feedSite("demo", []string{hostA, "mirror.example.test"}, f.a), feedSite("other", []string{hostB}, f.b))
	cfg := testConfig(t, f.ctl)
	for _, fn := range tweak {
		fn(&cfg)
	}
	f.edge = startEdge(t, cfg, f.store)
	f.edge.waitVersion(t, v)
	return f
}

func TestServeObjects(t *testing.T) {
	f := newFixture(t)
	pk := f.a.object("dists/stable/main/binary-amd64/Packages")
	byHash := "/dists/stable/main/binary-amd64/by-hash/SHA256/" + sha(pk)
	tests := []struct {
		name, host, path, ctype, cc string
		body                        []byte
	}{
		{"InRelease", hostA, "/dists/stable/InRelease", "text/plain; charset=utf-8", "public, max-age=60", f.a.object("dists/stable/InRelease")},
		{"Release", hostA, "/dists/stable/Release", "text/plain; charset=utf-8", "public, max-age=60", f.a.object("dists/stable/Release")},
		{"Release.gpg", hostA, "/dists/stable/Release.gpg", "application/pgp-signature", "public, max-age=60", f.a.object("dists/stable/Release.gpg")},
		{"Packages", hostA, "/dists/stable/main/binary-amd64/Packages", "text/plain; charset=utf-8", "public, max-age=60", pk},
		{"Packages.gz", hostA, "/dists/stable/main/binary-amd64/Packages.gz", "application/gzip", "public, max-age=60", f.a.object("dists/stable/main/binary-amd64/Packages.gz")},
		{"by-hash takes its sibling's type", hostA, byHash, "text/plain; charset=utf-8", "public, max-age=31536000, immutable", pk},
		{"deb", hostA, "/pool/main/h/hello/hello_1_amd64.deb", "application/vnd.debian.binary-package", "public, max-age=31536000, immutable", f.a.object("pool/main/h/hello/hello_1_amd64.deb")},
		{"host normalised", "APT.Example.TEST.:8080", "/dists/stable/InRelease", "text/plain; charset=utf-8", "public, max-age=60", f.a.object("dists/stable/InRelease")},
		{"second hostname", "mirror.example.test", "/dists/stable/InRelease", "text/plain; charset=utf-8", "public, max-age=60", f.a.object("dists/stable/InRelease")},
		{"query ignored", hostA, "/dists/stable/InRelease?x=1", "text/plain; charset=utf-8", "public, max-age=60", f.a.object("dists/stable/InRelease")},
		{"escaped letter", hostA, "/dists/stable/In%52elease", "text/plain; charset=utf-8", "public, max-age=60", f.a.object("dists/stable/InRelease")},
		{"other site", hostB, "/dists/stable/InRelease", "text/plain; charset=utf-8", "public, max-age=60", f.b.object("dists/stable/InRelease")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, f.edge.addr, "GET", tt.host, tt.path)
			wantStatus(t, tt.path, resp, body, 200)
			if !bytes.Equal(body, tt.body) {
				t.Fatalf("body %.60q; want %.60q", body, tt.body)
			}
			want := map[string]string{
				"Content-Type":   tt.ctype,
				"Cache-Control":  tt.cc,
				"ETag":           `"` + sha(tt.body) + `"`,
				"Accept-Ranges":  "bytes",
				"Content-Length": fmt.Sprint(len(tt.body)),
			}
			for k, v := range want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s: %q; want %q", k, got, v)
				}
			}
			if _, err := http.ParseTime(resp.Header.Get("Last-Modified")); err != nil {
				t.Errorf("Last-Modified %q: %v", resp.Header.Get("Last-Modified"), err)
			}
		})
	}
}

func TestServeNotFound(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, host, path string
		status           int
	}{
		{"unknown host", "nope.example.test", "/dists/stable/InRelease", 404},
		{"unknown path", hostA, "/dists/stable/Nope", 404},
		{"file with a trailing slash", hostA, "/dists/stable/InRelease/", 404},
		{"unknown directory", hostA, "/dists/nope/", 404},
		{"store layout path", hostA, "/objects/sha256/" + f.a.sum[:2] + "/" + f.a.sum, 404},
		{"manifest digest", hostA, "/" + f.a.sum, 404},
		{"bad host", "a b", "/dists/stable/InRelease", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, f.edge.addr, "GET", tt.host, tt.path)
			wantStatus(t, tt.path, resp, body, tt.status)
		})
	}
	resp, body := get(t, f.edge.addr, "POST", hostA, "/dists/stable/InRelease")
	wantStatus(t, "POST", resp, body, 405)
	if resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("Allow: %q", resp.Header.Get("Allow"))
	}
}

func TestSitesIsolated(t *testing.T) {
	f := newFixture(t)
	// The same path names different objects on each site.
	for _, c := range []struct {
		host string
		r    *rel
	}{{hostA, f.a}, {hostB, f.b}} {
		resp, body := get(t, f.edge.addr, "GET", c.host, "/dists/stable/InRelease")
		wantStatus(t, c.host, resp, body, 200)
		if !bytes.Equal(body, c.r.object("dists/stable/InRelease")) {
			t.Errorf("%s served %q", c.host, body)
		}
	}
	// The other tenant's paths, by-hash objects and pool files are not there.
	otherPk := f.b.object("dists/stable/main/binary-amd64/Packages")
	for _, p := range []string{
		"/pool/main/h/hello/hello_7_amd64.deb",
		"/dists/stable/main/binary-amd64/by-hash/SHA256/" + sha(otherPk),
	} {
		resp, body := get(t, f.edge.addr, "GET", hostA, p)
		wantStatus(t, "other tenant's "+p, resp, body, 404)
		resp, body = get(t, f.edge.addr, "GET", hostB, p)
		wantStatus(t, "own "+p, resp, body, 200)
	}
}

func TestHead(t *testing.T) {
	f := newFixture(t)
	want := f.a.object("dists/stable/InRelease")
	resp, body := get(t, f.edge.addr, "HEAD", hostA, "/dists/stable/InRelease")
	wantStatus(t, "HEAD", resp, body, 200)
	if len(body) != 0 || resp.ContentLength != int64(len(want)) {
		t.Fatalf("HEAD: body %d bytes, Content-Length %d; want none and %d", len(body), resp.ContentLength, len(want))
	}
	if resp.Header.Get("ETag") != `"`+sha(want)+`"` {
		t.Errorf("HEAD ETag %q", resp.Header.Get("ETag"))
	}
	// Over a raw connection: HEAD must not send a body, so a second request on the
	// same connection parses.
	r2, b2 := raw(t, f.edge.addr, "HEAD /dists/stable/Release HTTP/1.1\r\nHost: "+hostA+"\r\nConnection: close\r\n\r\n")
	wantStatus(t, "raw HEAD", r2, b2, 200)
	if len(b2) != 0 || r2.ContentLength != int64(len(f.a.object("dists/stable/Release"))) {
		t.Fatalf("raw HEAD: %d body bytes, Content-Length %d", len(b2), r2.ContentLength)
	}
}

func TestRanges(t *testing.T) {
	f := newFixture(t)
	const p = "/dists/stable/InRelease"
	obj := f.a.object("dists/stable/InRelease")
	n := len(obj)
	etag := `"` + sha(obj) + `"`
	resp, _ := get(t, f.edge.addr, "GET", hostA, p)
	lm := resp.Header.Get("Last-Modified")
	lmTime, _ := http.ParseTime(lm)
	older := lmTime.Add(-time.Hour).Format(http.TimeFormat)
	tests := []struct {
		name    string
		hdr     []string
		status  int
		body    []byte
		crange  string
		method  string
		noRange bool
	}{
		{"first bytes", []string{"Range", "bytes=0-9"}, 206, obj[:10], fmt.Sprintf("bytes 0-9/%d", n), "", false},
		{"open ended", []string{"Range", "bytes=10-"}, 206, obj[10:], fmt.Sprintf("bytes 10-%d/%d", n-1, n), "", false},
		{"suffix", []string{"Range", "bytes=-5"}, 206, obj[n-5:], fmt.Sprintf("bytes %d-%d/%d", n-5, n-1, n), "", false},
		{"end clamped", []string{"Range", fmt.Sprintf("bytes=5-%d", n+100)}, 206, obj[5:], fmt.Sprintf("bytes 5-%d/%d", n-1, n), "", false},
		{"unsatisfiable", []string{"Range", fmt.Sprintf("bytes=%d-", n)}, 416, nil, fmt.Sprintf("bytes */%d", n), "", false},
		{"multi-range is a plain 200", []string{"Range", "bytes=0-1,5-6"}, 200, obj, "", "", true},
		{"malformed is ignored", []string{"Range", "bytes=x-y"}, 200, obj, "", "", true},
		{"other unit is ignored", []string{"Range", "lines=1-2"}, 200, obj, "", "", true},
		{"If-Range etag match", []string{"Range", "bytes=0-9", "If-Range", etag}, 206, obj[:10], fmt.Sprintf("bytes 0-9/%d", n), "", false},
		{"If-Range etag mismatch", []string{"Range", "bytes=0-9", "If-Range", `"0000"`}, 200, obj, "", "", true},
		{"If-Range weak etag never matches", []string{"Range", "bytes=0-9", "If-Range", "W/" + etag}, 200, obj, "", "", true},
		{"If-Range date match", []string{"Range", "bytes=0-9", "If-Range", lm}, 206, obj[:10], fmt.Sprintf("bytes 0-9/%d", n), "", false},
		{"If-Range older date", []string{"Range", "bytes=0-9", "If-Range", older}, 200, obj, "", "", true},
		{"HEAD with range", []string{"Range", "bytes=0-9"}, 206, nil, fmt.Sprintf("bytes 0-9/%d", n), "HEAD", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = "GET"
			}
			resp, body := get(t, f.edge.addr, method, hostA, p, tt.hdr...)
			wantStatus(t, tt.name, resp, body, tt.status)
			if !bytes.Equal(body, tt.body) {
				t.Errorf("body %q; want %q", body, tt.body)
			}
			if got := resp.Header.Get("Content-Range"); got != tt.crange {
				t.Errorf("Content-Range %q; want %q", got, tt.crange)
			}
			if method == "HEAD" && resp.ContentLength != 10 {
				t.Errorf("HEAD range Content-Length %d; want 10", resp.ContentLength)
			}
		})
	}
}

func TestConditional(t *testing.T) {
	f := newFixture(t)
	const p = "/dists/stable/InRelease"
	resp, _ := get(t, f.edge.addr, "GET", hostA, p)
	etag, lm := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	lmTime, _ := http.ParseTime(lm)
	before := lmTime.Add(-time.Second).Format(http.TimeFormat)
	after := time.Now().UTC().Format(http.TimeFormat) // later than Last-Modified, not than the clock
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name   string
		hdr    []string
		status int
	}{
		{"If-None-Match", []string{"If-None-Match", etag}, 304},
		{"If-None-Match weak", []string{"If-None-Match", "W/" + etag}, 304},
		{"If-None-Match list", []string{"If-None-Match", `"abc", ` + etag}, 304},
		{"If-None-Match star", []string{"If-None-Match", "*"}, 304},
		{"If-None-Match other", []string{"If-None-Match", `"abc"`}, 200},
		{"If-Modified-Since same", []string{"If-Modified-Since", lm}, 304},
		{"If-Modified-Since later", []string{"If-Modified-Since", after}, 304},
		{"If-Modified-Since earlier", []string{"If-Modified-Since", before}, 200},
		{"If-Modified-Since in the future (invalid, ignored)", []string{"If-Modified-Since", future}, 200},
		{"If-None-Match wins over If-Modified-Since", []string{"If-None-Match", `"abc"`, "If-Modified-Since", after}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, f.edge.addr, "GET", hostA, p, tt.hdr...)
			wantStatus(t, tt.name, resp, body, tt.status)
			if tt.status == 304 {
				if len(body) != 0 || resp.Header.Get("ETag") != etag || resp.Header.Get("Cache-Control") == "" {
					t.Errorf("304: body %q, ETag %q, Cache-Control %q", body, resp.Header.Get("ETag"), resp.Header.Get("Cache-Control"))
				}
			}
		})
	}
}

func TestAbsoluteFormAndHost(t *testing.T) {
	f := newFixture(t)
	inA := f.a.object("dists/stable/InRelease")
	tests := []struct {
		name, request string
		status        int
		body          []byte
	}{
		{"absolute form uses the URI's host", "GET http://" + hostA + "/dists/stable/InRelease HTTP/1.1\r\nHost: " + hostB + "\r\nConnection: close\r\n\r\n", 200, inA},
		{"absolute form with port and case", "GET HTTP://APT.example.test:80/dists/stable/InRelease HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200, inA},
		{"absolute form unknown host", "GET http://nope.test/dists/stable/InRelease HTTP/1.1\r\nHost: " + hostA + "\r\nConnection: close\r\n\r\n", 404, nil},
		{"absolute form with userinfo", "GET http://u@" + hostA + "/dists/stable/InRelease HTTP/1.1\r\nHost: " + hostA + "\r\nConnection: close\r\n\r\n", 400, nil},
		{"HTTP/1.1 without Host", "GET /dists/stable/InRelease HTTP/1.1\r\nConnection: close\r\n\r\n", 400, nil},
		{"HTTP/1.0 without Host", "GET /dists/stable/InRelease HTTP/1.0\r\n\r\n", 400, nil},
		{"HTTP/1.0 with Host", "GET /dists/stable/InRelease HTTP/1.0\r\nHost: " + hostA + "\r\n\r\n", 200, inA},
		{"oversized header", "GET /dists/stable/InRelease HTTP/1.1\r\nHost: " + hostA + "\r\nX-Big: " + strings.Repeat("x", 9000) + "\r\n\r\n", 431, nil},
		{"asterisk form", "GET * HTTP/1.1\r\nHost: " + hostA + "\r\nConnection: close\r\n\r\n", 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := raw(t, f.edge.addr, tt.request)
			wantStatus(t, tt.name, resp, body, tt.status)
			if tt.body != nil && !bytes.Equal(body, tt.body) {
				t.Errorf("body %q; want %q", body, tt.body)
			}
		})
	}
}

func TestTraversal(t *testing.T) {
	f := newFixture(t)
	objects := map[string]bool{}
	for _, r := range []*rel{f.a, f.b} {
		for _, b := range r.files {
			objects[string(b)] = true
		}
	}
	paths := []string{
		"/../dists/stable/InRelease",
		"/dists/stable/../stable/InRelease",
		"/dists/./stable/InRelease",
		"/%2e%2e/dists/stable/InRelease",
		"/dists/stable/%2E%2E/stable/InRelease",
		"/dists%2fstable%2fInRelease",
		"/dists/stable%2FInRelease",
		"/dists%5cstable/InRelease",
		"/dists\\stable/InRelease",
		"/dists/stable/InRelease/",
		"/dists/stable/InRelease%00",
		"/dists/stable/InRelease%",
		"/dists/stable/InRelease%zz",
		"/pool/../../../etc/passwd",
		"/..%2f..%2fetc/passwd",
		"/%2e%2e%2f%2e%2e%2fetc/passwd",
	}
	for _, p := range paths {
		t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
			resp, body := raw(t, f.edge.addr, "GET "+p+" HTTP/1.1\r\nHost: "+hostA+"\r\nConnection: close\r\n\r\n")
			if resp.StatusCode != 400 && resp.StatusCode != 404 {
				t.Fatalf("GET %s: status %d; want 400 or 404", p, resp.StatusCode)
			}
			if objects[string(body)] {
				t.Fatalf("GET %s served an object", p)
			}
		})
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in, want string
		dir      bool
		status   int
	}{
		{"/dists/stable/InRelease", "dists/stable/InRelease", false, 0},
		{"/pool/main/h/hello/hello_1.0%7erc1_amd64.deb", "pool/main/h/hello/hello_1.0~rc1_amd64.deb", false, 0},
		{"/a%2Bb", "a+b", false, 0},
		{"", "", false, 400},
		{"dists", "", false, 400},
		{"/", "", true, 0},
		{"//", "", true, 0},
		{"/a//b", "a/b", false, 0},
		{"//dists/stable/Release", "dists/stable/Release", false, 0},
		{"/dists///stable//%41", "dists/stable/A", false, 0},
		{"/a/", "a", true, 0},
		{"/a//", "a", true, 0},
		{"//a/b/", "a/b", true, 0},
		{"/a//../b", "", false, 400},
		{"/a/../b", "", false, 400},
		{"/a/%2e/b", "", false, 400},
		{"/a/./", "", false, 400},
		{"/a%2fb", "", false, 400},
		{"/a%5Cb", "", false, 400},
		{"/a%0ab", "", false, 400},
		{"/a%", "", false, 400},
		{"/a%4", "", false, 400},
		{"/a\x7fb", "", false, 400},
		{"/..", "", false, 400},
		{"/...", "...", false, 0},
	}
	for _, tt := range tests {
		got, dir, status := CleanPath(tt.in)
		if got != tt.want || dir != tt.dir || status != tt.status {
			t.Errorf("CleanPath(%q) = %q, dir %v, %d; want %q, dir %v, %d", tt.in, got, dir, status, tt.want, tt.dir, tt.status)
		}
	}
}

// TestLastModifiedSettles: a path that can change carries no Last-Modified, and
// If-Modified-Since is not honoured for it, in the seconds right after its release's
// activation (two flips within one second must not give a false 304); by-hash/ and
// pool/ paths carry it at once.
func TestLastModifiedSettles(t *testing.T) {
	f := newFixture(t)
	r2 := makeRelease(t, f.store, "demo", "2026-11-21T10:00:00Z", aptTree("demo", 2))
	now := time.Now().UTC()
	s := feedSite("demo", []string{hostA}, r2, f.a)
	s.Active.ActivatedAt = now
	f.edge.waitVersion(t, f.ctl.set(s, feedSite("other", []string{hostB}, f.b)))
	since := now.Format(http.TimeFormat) // the activation's second: not yet settled

	resp, body := get(t, f.edge.addr, "GET", hostA, "/dists/stable/InRelease", "If-Modified-Since", since)
	wantStatus(t, "fresh InRelease with If-Modified-Since", resp, body, 200)
	if lm := resp.Header.Get("Last-Modified"); lm != "" {
		t.Fatalf("fresh InRelease has Last-Modified %q", lm)
	}
	resp, body = get(t, f.edge.addr, "GET", hostA, "/pool/main/h/hello/hello_2_amd64.deb", "If-Modified-Since", since)
	wantStatus(t, "pool file with If-Modified-Since", resp, body, 304)

	r := f.edge.table.Load().hosts[hostA].routes.paths["dists/stable/InRelease"]
	if r.lastModifiedAt(now.Unix()+1) || !r.lastModifiedAt(now.Unix()+settleSeconds) {
		t.Fatalf("InRelease's Last-Modified usable at +1s: %v, at +%ds: %v; want false, true",
			r.lastModifiedAt(now.Unix()+1), settleSeconds, r.lastModifiedAt(now.Unix()+settleSeconds))
	}
}
