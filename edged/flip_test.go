package edged

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/duration"
)

// TestFlipAtomic flips between releases while readers fetch InRelease and then the
// by-hash Packages it names, as apt does: every pair must match, whatever flip happens
// between the two requests.
func TestFlipAtomic(t *testing.T) {
	f := newFixture(t)
	gens := []*rel{f.a}
	for g := 2; g <= 4; g++ {
		gens = append(gens, makeRelease(t, f.store, "demo", "2026-11-20T10:00:00Z", aptTree("demo", g)))
	}
	named := regexp.MustCompile(` ([0-9a-f]{64}) (\d+) main/binary-amd64/Packages\n`)
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, in := get(t, f.edge.addr, "GET", hostA, "/dists/stable/InRelease")
				m := named.FindSubmatch(in)
				if resp.StatusCode != 200 || m == nil {
					errs <- fmt.Errorf("InRelease: status %d, body %q", resp.StatusCode, in)
					return
				}
				resp, pk := get(t, f.edge.addr, "GET", hostA, "/dists/stable/main/binary-amd64/by-hash/SHA256/"+string(m[1]))
				if resp.StatusCode != 200 || sha(pk) != string(m[1]) {
					errs <- fmt.Errorf("by-hash Packages named by InRelease: status %d, digest %s; want %s", resp.StatusCode, sha(pk), m[1])
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := 1; i <= 12; i++ {
		cur := gens[i%len(gens)]
		var retained []*rel
		for _, g := range gens {
			if g != cur {
				retained = append(retained, g)
			}
		}
		v := f.ctl.set(feedSite("demo", []string{hostA}, cur, retained...), feedSite("other", []string{hostB}, f.b))
		f.edge.waitVersion(t, v)
		// The flip is visible at once to a new request.
		resp, in := get(t, f.edge.addr, "GET", hostA, "/dists/stable/InRelease")
		if !bytes.Equal(in, cur.object("dists/stable/InRelease")) {
			t.Fatalf("after flip %d: status %d, InRelease %q", i, resp.StatusCode, in)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() == 0 {
		t.Fatal("no reader completed a read")
	}
}

// TestFlipSeenQuickly: a flip ends the edge's parked long poll at once, rather than
// waiting for the poll to time out.
func TestFlipSeenQuickly(t *testing.T) {
	const wait = 30 * time.Second
	f := newFixture(t, func(c *Config) { c.Poll.Wait = duration.Duration(wait) })
	r2 := makeRelease(t, f.store, "demo", "2026-11-21T10:00:00Z", aptTree("demo", 2))
	time.Sleep(100 * time.Millisecond) // the edge is now parked in a long poll
	start := time.Now()
	v := f.ctl.set(feedSite("demo", []string{hostA}, r2, f.a), feedSite("other", []string{hostB}, f.b))
	f.edge.waitVersion(t, v)
	if d := time.Since(start); d > wait/3 {
		t.Fatalf("flip applied after %s: the long poll (wait %s) did not return on the change", d, wait)
	}
}

// TestPrewarm: the new release's index files are in the cache before the swap.
func TestPrewarm(t *testing.T) {
	f := newFixture(t)
	r2 := makeRelease(t, f.store, "demo", "2026-11-21T10:00:00Z", aptTree("demo", 2))
	v := f.ctl.set(feedSite("demo", []string{hostA}, r2, f.a), feedSite("other", []string{hostB}, f.b))
	f.edge.waitVersion(t, v)
	warm := map[string]bool{} // by-hash copies share their index's digest
	for p, data := range r2.files {
		warm[sha(data)] = warm[sha(data)] || warmable(p)
	}
	for p, data := range r2.files {
		if got := f.edge.objects.cached(sha(data)); got != warm[sha(data)] {
			t.Errorf("%s: cached %v at the swap; want %v", p, got, warm[sha(data)])
		}
	}
	// A flip whose pre-warm cannot complete is not applied.
	r3 := makeRelease(t, f.store, "demo", "2026-11-22T10:00:00Z", aptTree("demo", 3))
	f.store.down.Store(true)
	v3 := f.ctl.set(feedSite("demo", []string{hostA}, r3, r2, f.a), feedSite("other", []string{hostB}, f.b))
	time.Sleep(300 * time.Millisecond)
	if got := f.edge.Version(); got != v {
		t.Fatalf("version %d served while the store is down; want %d kept", got, v)
	}
	resp, body := get(t, f.edge.addr, "GET", hostA, "/dists/stable/InRelease")
	if !bytes.Equal(body, r2.object("dists/stable/InRelease")) {
		t.Fatalf("while the new release cannot be warmed: status %d, %q; want the previous release", resp.StatusCode, body)
	}
	f.store.down.Store(false)
	f.edge.waitVersion(t, v3)
}

func TestRetained(t *testing.T) {
	f := newFixture(t)
	old := f.a
	oldTree := old.files
	newTree := aptTree("demo", 2)
	delete(newTree, "dists/stable/main/binary-amd64/Release")
	r2 := makeRelease(t, f.store, "demo", "2026-11-21T10:00:00Z", newTree)
	soon := feedSite("demo", []string{hostA}, r2, old)
	soon.Retained[0].Until = time.Now().Add(3 * time.Second)
	v := f.ctl.set(soon, feedSite("other", []string{hostB}, f.b))
	f.edge.waitVersion(t, v)

	oldPk := oldTree["dists/stable/main/binary-amd64/Packages"]
	oldByHash := "/dists/stable/main/binary-amd64/by-hash/SHA256/" + sha(oldPk)
	tests := []struct {
		name, path string
		status     int
		body       []byte
	}{
		{"old by-hash", oldByHash, 200, oldPk},
		{"old pool file", "/pool/main/h/hello/hello_1_amd64.deb", 200, oldTree["pool/main/h/hello/hello_1_amd64.deb"]},
		{"new pool file", "/pool/main/h/hello/hello_2_amd64.deb", 200, newTree["pool/main/h/hello/hello_2_amd64.deb"]},
		{"index path is the new release's", "/dists/stable/InRelease", 200, newTree["dists/stable/InRelease"]},
		{"old-only index path is gone", "/dists/stable/main/binary-amd64/Release", 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, f.edge.addr, "GET", hostA, tt.path)
			wantStatus(t, tt.path, resp, body, tt.status)
			if tt.body != nil && !bytes.Equal(body, tt.body) {
				t.Fatalf("body %q; want %q", body, tt.body)
			}
			if tt.status == 200 && strings.Contains(tt.path, "by-hash") && resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
				t.Errorf("Cache-Control %q", resp.Header.Get("Cache-Control"))
			}
		})
	}
	// Once the retention window ends, the old release's objects are gone.
	time.Sleep(time.Until(soon.Retained[0].Until) + 50*time.Millisecond)
	for _, p := range []string{oldByHash, "/pool/main/h/hello/hello_1_amd64.deb"} {
		resp, body := get(t, f.edge.addr, "GET", hostA, p)
		wantStatus(t, "after the window "+p, resp, body, 404)
	}
	resp, body := get(t, f.edge.addr, "GET", hostA, "/pool/main/h/hello/hello_2_amd64.deb")
	wantStatus(t, "active pool file after the window", resp, body, 200)
}

// TestSingleflight: 50 concurrent misses of one object make one store fetch.
func TestSingleflight(t *testing.T) {
	f := newFixture(t)
	const p = "pool/main/h/hello/hello_1_amd64.deb"
	want := f.a.object(p)
	sum := sha(want)
	if n := f.store.openCount(sum); n != 0 {
		t.Fatalf("pool file fetched %d times before any request", n)
	}
	f.store.delay.Store(int64(100 * time.Millisecond))
	var wg sync.WaitGroup
	bodies := make([][]byte, 50)
	statuses := make([]int, 50)
	start := make(chan struct{})
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, body := get(t, f.edge.addr, "GET", hostA, "/"+p)
			bodies[i], statuses[i] = body, resp.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	for i := range bodies {
		if statuses[i] != 200 || !bytes.Equal(bodies[i], want) {
			t.Fatalf("request %d: status %d, body %q", i, statuses[i], bodies[i])
		}
	}
	if n := f.store.openCount(sum); n != 1 {
		t.Fatalf("store opened %d times for 50 concurrent misses; want 1", n)
	}
}

// TestLargeFromDiskCache: objects over the threshold are fetched once into the disk
// cache, checked, and served from there, whole and by range; never held in the memory
// cache. With the store down, an object on disk is still served and one that is not
// gets 503.
func TestLargeFromDiskCache(t *testing.T) {
	cas := newTestStore()
	ctl := newFakeControld(t)
	tree := aptTree("demo", 1)
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320000 bytes
	big[12345] = 'X'
	const p = "pool/main/b/big/big_1_amd64.deb"
	tree[p] = big
	other := bytes.Repeat([]byte("fedcba9876543210"), 20000)
	const q = "pool/main/o/other/other_1_amd64.deb"
	tree[q] = other
	r := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree)
	v := ctl.set(feedSite("demo", []string{hostA}, r))
	cfg := testConfig(t, ctl)
	cfg.StreamThreshold = 64 * KiB
	e := startEdge(t, cfg, cas)
	e.waitVersion(t, v)
	sum := sha(big)

	for i := 1; i <= 2; i++ {
		resp, body := get(t, e.addr, "GET", hostA, "/"+p)
		wantStatus(t, "big", resp, body, 200)
		if !bytes.Equal(body, big) || resp.ContentLength != int64(len(big)) {
			t.Fatalf("big object: %d bytes (Content-Length %d); want %d", len(body), resp.ContentLength, len(big))
		}
		if n := cas.openCount(sum); n != 1 {
			t.Fatalf("after %d GETs the store was opened %d times; want 1 (then the disk cache)", i, n)
		}
	}
	if e.objects.cached(sum) {
		t.Fatal("large object is in the memory cache")
	}
	resp, body := get(t, e.addr, "GET", hostA, "/"+p, "Range", "bytes=12340-12349")
	wantStatus(t, "big range", resp, body, 206)
	if !bytes.Equal(body, big[12340:12350]) || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 12340-12349/%d", len(big)) {
		t.Fatalf("range of big object: %q, Content-Range %q", body, resp.Header.Get("Content-Range"))
	}
	stats := cas.statCount()
	resp, body = get(t, e.addr, "HEAD", hostA, "/"+p)
	if resp.StatusCode != 200 || len(body) != 0 || resp.ContentLength != int64(len(big)) || cas.openCount(sum) != 1 || cas.statCount() != stats {
		t.Fatalf("HEAD big: status %d, %d body bytes, Content-Length %d, store asked again: %v", resp.StatusCode, len(body), resp.ContentLength,
			cas.openCount(sum) != 1 || cas.statCount() != stats)
	}
	cas.down.Store(true)
	resp, body = get(t, e.addr, "GET", hostA, "/"+p)
	wantStatus(t, "big on disk with the store down", resp, body, 200)
	resp, body = get(t, e.addr, "GET", hostA, "/"+q)
	wantStatus(t, "big not on disk with the store down", resp, body, 503)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
}

// TestRetainedManifestMissing: a retained release whose manifest is gone from the store
// does not block the routes; the active release is served.
func TestRetainedManifestMissing(t *testing.T) {
	f := newFixture(t)
	gone := makeRelease(t, newTestStore(), "demo", "2026-11-19T10:00:00Z", aptTree("demo", 0))
	r2 := makeRelease(t, f.store, "demo", "2026-11-21T10:00:00Z", aptTree("demo", 2))
	v := f.ctl.set(feedSite("demo", []string{hostA}, r2, f.a, gone), feedSite("other", []string{hostB}, f.b))
	f.edge.waitVersion(t, v)
	resp, body := get(t, f.edge.addr, "GET", hostA, "/pool/main/h/hello/hello_1_amd64.deb")
	wantStatus(t, "retained release that loaded", resp, body, 200)
	resp, body = get(t, f.edge.addr, "GET", hostA, "/pool/main/h/hello/hello_0_amd64.deb")
	wantStatus(t, "retained release whose manifest is gone", resp, body, 404)
}

// TestFeedRejected: a feed naming a manifest of another repository, or claiming a
// hostname twice, is not applied.
func TestFeedRejected(t *testing.T) {
	f := newFixture(t)
	v := f.edge.Version()
	r2 := makeRelease(t, f.store, "demo", "2026-11-21T10:00:00Z", aptTree("demo", 2))
	tests := []struct {
		name  string
		sites []api.Site
	}{
		{"manifest of another repository", []api.Site{feedSite("other", []string{hostB}, r2)}},
		{"hostname claimed twice", []api.Site{feedSite("demo", []string{hostA}, r2), feedSite("other", []string{"APT.example.test"}, f.b)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.ctl.set(tt.sites...)
			time.Sleep(200 * time.Millisecond)
			if got := f.edge.Version(); got != v {
				t.Fatalf("edge applied version %d; want %d kept", got, v)
			}
			resp, body := get(t, f.edge.addr, "GET", hostB, "/dists/stable/InRelease")
			if resp.StatusCode != 200 || !bytes.Equal(body, f.b.object("dists/stable/InRelease")) {
				t.Fatalf("other's InRelease: %d %q", resp.StatusCode, body)
			}
		})
	}
}
