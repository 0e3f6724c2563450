package edged

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/manifest"
)

const rsaFingerprint = "23126D40EA6C7D852299B8D5A413F50BCB095712"

func readKey(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("../testdata/keys/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pageEdge starts an edge serving tree as repository demo at hostA and 127.0.0.1, with
// the given armored keys, and returns it with the feed's site and the fake controld.
func pageEdge(t *testing.T, tree map[string][]byte, keys ...string) (*testEdge, api.Site, *fakeControld) {
	t.Helper()
	cas := newTestStore()
	return pageEdgeServing(t, cas, makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree), keys...)
}

// pageEdgeServing is pageEdge for a release already in cas.
func pageEdgeServing(t *testing.T, cas *testStore, r *rel, keys ...string) (*testEdge, api.Site, *fakeControld) {
	t.Helper()
	ctl := newFakeControld(t)
	site := feedSite("demo", []string{hostA, "127.0.0.1"}, r)
	site.Keys = keys
	v := ctl.set(site)
	e := startEdge(t, testConfig(t, ctl), cas)
	e.waitVersion(t, v)
	return e, site, ctl
}

// wellFormed fails unless page parses as XML (the page is written so that it does:
// every element closed, every attribute quoted, every '<' and '&' of data escaped).
func wellFormed(t testing.TB, page []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("page is not well-formed: %v\n%s", err, page)
		}
	}
}

func wantContains(t *testing.T, what string, body []byte, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(string(body), w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
	if t.Failed() {
		t.Fatalf("%s:\n%s", what, body)
	}
}

// TestPage: "/" of a hostname is the repository page: the .sources entry with
// Signed-By and the request's scheme and host, the curl command for the key, the key's
// fingerprint, suites, the active release and its activation, the packages linking to
// their .debs; it carries the validators of a cached object, answers HEAD and
// conditional requests, and a client that accepts JSON still gets the root listing.
func TestPage(t *testing.T) {
	tree := aptTree("demo", 1)
	e, site, _ := pageEdge(t, tree, readKey(t, "rsa.pub.asc"))
	resp, body := get(t, e.addr, "GET", hostA, "/")
	wantStatus(t, "GET /", resp, body, 200)
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("page Content-Type %q", ct)
	}
	wellFormed(t, body)
	activated := site.Active.ActivatedAt.UTC()
	wantContains(t, "page", body,
		"<pre id=\"sources\">Types: deb\nURIs: http://apt.example.test/\nSuites: stable\nComponents: main\n"+
			"Signed-By: /usr/share/keyrings/demo-archive-keyring.gpg\n</pre>",
		"sudo curl -fsSL -o /usr/share/keyrings/demo-archive-keyring.gpg http://apt.example.test/demo-archive-keyring.gpg",
		`<code class="fingerprint">`+rsaFingerprint+`</code>`,
		"armor test key RSA4096 &lt;rsa@armor.invalid&gt;",
		"<tr><td>stable</td><td>main</td><td>amd64</td></tr>",
		"<code>"+site.Active.ID+"</code>",
		`<time datetime="`+activated.Format(time.RFC3339)+`">`+activated.Format("2006-01-02 15:04:05")+" UTC</time>",
		"2026-11-20T10:00:00Z",
		`<a href="/pool/main/h/hello/hello_1_amd64.deb">hello_1_amd64</a></td><td>1</td><td>amd64</td><td>stable/main</td>`,
		`<a href="dists/">dists/</a>`, `<a href="demo-archive-keyring.gpg">`,
	)
	if got, want := resp.Header.Get("ETag"), `"`+sha(body)+`"`; got != want {
		t.Errorf("ETag %s; want the page's SHA-256 %s", got, want)
	}
	// Last-Modified is the later of the activation and this edge's first serving of the
	// site's keys (its start here), sent once that second is settled.
	since := time.Unix(e.table.Load().sites[0].page.since, 0).UTC()
	if since.Before(activated) {
		t.Fatalf("page date %s before the activation %s", since, activated)
	}
	if lm := resp.Header.Get("Last-Modified"); lm != "" && time.Now().Unix() < since.Unix()+settleSeconds {
		t.Errorf("Last-Modified %q sent within the settle time of %s", lm, since)
	}
	for time.Now().Unix() < since.Unix()+settleSeconds {
		time.Sleep(50 * time.Millisecond)
	}
	resp, body = get(t, e.addr, "GET", hostA, "/")
	if got, want := resp.Header.Get("Last-Modified"), since.Format(http.TimeFormat); got != want {
		t.Errorf("Last-Modified %q; want %q", got, want)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=60" {
		t.Errorf("Cache-Control %q", cc)
	}
	etag := resp.Header.Get("ETag")

	// The plain page is kept in the object cache under its digest, and rendered again,
	// identically, once evicted.
	if !e.objects.cached(sha(body)) {
		t.Errorf("the page is not in the object cache")
	}
	e.objects.cache.Del(cacheKey(sha(body)))
	e.objects.cache.Wait()
	if resp, again := get(t, e.addr, "GET", hostA, "/"); !bytes.Equal(again, body) || resp.Header.Get("ETag") != etag {
		t.Errorf("the page rendered again differs")
	}

	resp, head := get(t, e.addr, "HEAD", hostA, "/")
	wantStatus(t, "HEAD /", resp, head, 200)
	if resp.ContentLength != int64(len(body)) || len(head) != 0 || resp.Header.Get("ETag") != etag {
		t.Errorf("HEAD /: Content-Length %d (want %d), %d body bytes, ETag %s", resp.ContentLength, len(body), len(head), resp.Header.Get("ETag"))
	}
	resp, b := get(t, e.addr, "GET", hostA, "/", "If-None-Match", etag)
	wantStatus(t, "If-None-Match", resp, b, 304)
	resp, b = get(t, e.addr, "GET", hostA, "/", "If-Modified-Since", since.Format(http.TimeFormat))
	wantStatus(t, "If-Modified-Since", resp, b, 304)
	resp, b = get(t, e.addr, "GET", hostA, "/", "If-Modified-Since", since.Add(-time.Second).Format(http.TimeFormat))
	wantStatus(t, "If-Modified-Since a second before", resp, b, 200)

	// The scheme and host of the .sources entry are the request's.
	for _, c := range []struct{ host, want string }{
		{"APT.example.test:8080", "URIs: http://apt.example.test:8080/\n"},
		{"apt.example.test:80", "URIs: http://apt.example.test/\n"},
		{"127.0.0.1", "URIs: http://127.0.0.1/\n"},
	} {
		_, b := get(t, e.addr, "GET", c.host, "/")
		wantContains(t, "page for Host "+c.host, b, c.want)
	}

	// Through a proxy (absolute-form), the target's host and port are the page's.
	resp, b = raw(t, e.addr, "GET http://apt.example.test:8081/ HTTP/1.1\r\nHost: apt.example.test:9999\r\nConnection: close\r\n\r\n")
	wantStatus(t, "page through a proxy", resp, b, 200)
	wantContains(t, "page through a proxy", b, "URIs: http://apt.example.test:8081/\n")

	resp, b = get(t, e.addr, "GET", hostA, "/", "Accept", "application/json")
	wantStatus(t, "JSON root listing", resp, b, 200)
	var entries []listingEntry
	if err := json.Unmarshal(b, &entries); err != nil || len(entries) != 4 {
		t.Fatalf("JSON root listing %s: %v", b, err)
	}

	resp, b = get(t, e.addr, "GET", "unknown.example.test", "/")
	wantStatus(t, "page of an unknown host", resp, b, 404)
	resp, b = raw(t, e.addr, "GET / HTTP/1.0\r\n\r\n")
	wantStatus(t, "page without Host", resp, b, 400)
}

// TestPageKeys: a repository without keys gets no Signed-By and no key command; a key
// changed without a new release changes the page and moves its Last-Modified, so an
// If-Modified-Since of the old page never gets a false 304.
func TestPageKeys(t *testing.T) {
	e, site, ctl := pageEdge(t, aptTree("demo", 1))
	_, body := get(t, e.addr, "GET", hostA, "/")
	wellFormed(t, body)
	wantContains(t, "page without keys", body, "Components: main\n</pre>", "No signing key is registered")
	if bytes.Contains(body, []byte("Signed-By")) || bytes.Contains(body, []byte("curl")) {
		t.Fatalf("page without keys names a key:\n%s", body)
	}
	old := site.Active.ActivatedAt.UTC().Format(http.TimeFormat)

	site.Keys = []string{readKey(t, "eddsa.pub.asc")}
	changed := time.Now()
	e.waitVersion(t, ctl.set(site))
	resp, body := get(t, e.addr, "GET", hostA, "/", "If-Modified-Since", old)
	wantStatus(t, "If-Modified-Since of the page before the key", resp, body, 200)
	wantContains(t, "page with the new key", body, "46B67D6D4CA63BE43550B392875011482ECCA006",
		"Signed-By: /usr/share/keyrings/demo-archive-keyring.gpg\n")
	if lm := resp.Header.Get("Last-Modified"); lm != "" {
		if d, err := http.ParseTime(lm); err != nil || d.Unix() < changed.Unix() {
			t.Fatalf("Last-Modified %q after the key changed at %s", lm, changed.UTC().Format(http.TimeFormat))
		}
	}
	// The same keys and release in the next feed version keep the date and the page.
	first := e.table.Load().sites[0].page
	e.waitVersion(t, ctl.set(site))
	next := e.table.Load().sites[0].page
	if next.since != first.since {
		t.Fatalf("page date moved from %d to %d with the keys unchanged", first.since, next.since)
	}
	if len(next.rendered) != 1 || next.rendered["http://apt.example.test/"] != first.rendered["http://apt.example.test/"] {
		t.Fatalf("the rendered page was not carried to the next feed version: %v, then %v", first.rendered, next.rendered)
	}
}

// TestPageEscaping: names from the manifest and the query are escaped (the page stays
// well-formed, no markup is injected) and links are percent-escaped paths.
func TestPageEscaping(t *testing.T) {
	tree := aptTree("demo", 1)
	tree[`pool/main/x/<b>&"x"/<script>alert(1)'_1_amd64.deb`] = []byte("evil")
	e, _, _ := pageEdge(t, tree)
	for _, p := range []string{"/", `/?q=%3Cscript%3E`, `/?q=%22%3E%3Cimg+src%3Dx%3E%27%26`} {
		_, body := get(t, e.addr, "GET", hostA, p)
		wellFormed(t, body)
		for _, bad := range []string{"<script>", "<img", `"><`, `<b>&`} {
			if bytes.Contains(body, []byte(bad)) {
				t.Fatalf("GET %s: page holds %q unescaped:\n%s", p, bad, body)
			}
		}
	}
	_, body := get(t, e.addr, "GET", hostA, "/?q=script")
	wantContains(t, "page of an odd name", body,
		`<a href="/pool/main/x/%3Cb%3E&amp;%22x%22/%3Cscript%3Ealert%281%29%27_1_amd64.deb">&lt;script&gt;alert(1)&#39;_1_amd64</a>`)
	_, body = get(t, e.addr, "GET", hostA, `/?q=%22%3E%3Cimg+src%3Dx%3E%27%26`)
	wantContains(t, "page of an odd query", body, `value="&#34;&gt;&lt;img src=x&gt;&#39;&amp;"`, `<q>&#34;&gt;&lt;img src=x&gt;&#39;&amp;</q>`)
}

// TestPageSearch: /?q= filters the packages on the edge: every word must match (name,
// version, architecture or suite/component, any case); the count says how many matched;
// query pages are not kept in the cache; an overlong query is 400.
func TestPageSearch(t *testing.T) {
	tree := aptTree("demo", 1)
	for _, name := range []string{"libfoo1_2.0", "foo-utils_2.0", "bar_1.0"} {
		tree["pool/main/x/"+name+"_amd64.deb"] = []byte(name)
	}
	e, _, _ := pageEdge(t, tree)
	for _, c := range []struct {
		query string
		want  []string
		count string
	}{
		{"", []string{"bar_1.0_amd64", "foo-utils_2.0_amd64", "hello_1_amd64", "libfoo1_2.0_amd64"}, "4 packages."},
		{"foo", []string{"foo-utils_2.0_amd64", "libfoo1_2.0_amd64"}, "2 of 4 packages match"},
		{"FOO+utils", []string{"foo-utils_2.0_amd64"}, "1 of 4 packages matches"},
		{"stable%2Fmain+hello", []string{"hello_1_amd64"}, "1 of 4 packages matches"},
		{"nothing", nil, "0 of 4 packages match"},
		{"+++", []string{"bar_1.0_amd64", "foo-utils_2.0_amd64", "hello_1_amd64", "libfoo1_2.0_amd64"}, "4 packages."},
	} {
		resp, body := get(t, e.addr, "GET", hostA, "/?q="+c.query)
		wantStatus(t, "search "+c.query, resp, body, 200)
		wellFormed(t, body)
		var got []string
		for _, row := range strings.Split(string(body), "<tr><td><a href=")[1:] {
			got = append(got, row[strings.IndexByte(row, '>')+1:strings.Index(row, "</a>")])
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("q=%s lists %q; want %q", c.query, got, c.want)
		}
		wantContains(t, "search "+c.query, body, `<p id="count">`+c.count)
	}
	if n := len(e.table.Load().sites[0].page.rendered); n != 1 {
		t.Errorf("%d pages remembered after searches; want the plain one only", n)
	}
	resp, body := get(t, e.addr, "GET", hostA, "/?q="+strings.Repeat("x", pageMaxQuery+1))
	wantStatus(t, "overlong query", resp, body, 400)
}

// TestDerivePage: suites, components and architectures come from the manifest's
// paths; the .sources entry groups suites that share components.
func TestDerivePage(t *testing.T) {
	files := []string{
		"dists/bookworm/InRelease", "dists/bookworm/Release",
		"dists/bookworm/main/binary-amd64/Packages", "dists/bookworm/main/binary-amd64/Packages.xz",
		"dists/bookworm/main/binary-amd64/Release",
		"dists/bookworm/main/binary-amd64/by-hash/SHA256/00", "dists/bookworm/main/binary-arm64/Packages.gz",
		"dists/bookworm/contrib/binary-amd64/Packages", "dists/bookworm/main/debian-installer/binary-riscv64/Packages",
		"dists/bookworm/main/Contents-amd64.gz", "dists/bookworm/main/i18n/Translation-en",
		"dists/trixie/InRelease", "dists/trixie/main/binary-amd64/Packages", "dists/trixie/main/source/Sources.xz",
		"dists/sid/InRelease", "dists/sid/main/binary-amd64/Packages", "dists/sid/contrib/binary-amd64/Packages",
		"dists/sid/contrib/binary-all/Packages",
		"dists/empty/InRelease",
	}
	m := &manifest.Manifest{Date: "2026-11-20T10:00:00Z"}
	for _, f := range files {
		m.Files = append(m.Files, manifest.File{Path: f})
	}
	pr := derivePage(m)
	want := []suiteView{
		{Name: "bookworm", Components: []string{"contrib", "main"}, Architectures: []string{"amd64", "arm64", "riscv64"}},
		{Name: "empty", Components: []string{}, Architectures: []string{}},
		{Name: "sid", Components: []string{"contrib", "main"}, Architectures: []string{"all", "amd64"}},
		{Name: "trixie", Components: []string{"main"}, Architectures: []string{"amd64"}, Source: true},
	}
	if !reflect.DeepEqual(pr.suites, want) {
		t.Fatalf("suites\n%+v\nwant\n%+v", pr.suites, want)
	}
	got := sourcesEntry("https://apt.example.test/", "/usr/share/keyrings/x-archive-keyring.gpg", pr.suites)
	wantEntry := "Types: deb\nURIs: https://apt.example.test/\nSuites: bookworm sid\nComponents: contrib main\n" +
		"Signed-By: /usr/share/keyrings/x-archive-keyring.gpg\n\n" +
		"Types: deb deb-src\nURIs: https://apt.example.test/\nSuites: trixie\nComponents: main\n" +
		"Signed-By: /usr/share/keyrings/x-archive-keyring.gpg\n"
	if got != wantEntry {
		t.Fatalf("sources entry\n%s\nwant\n%s", got, wantEntry)
	}
}

// TestDerivePageAliases: a suite published under its codename and its suite name
// (dists/stable beside dists/bookworm, the same InRelease) is named once, by its codename,
// so apt does not fetch every index twice.
func TestDerivePageAliases(t *testing.T) {
	m := &manifest.Manifest{Date: "2026-11-20T10:00:00Z",
		Packages: []manifest.Package{{Suite: "bookworm", Component: "main", Name: "a", Version: "1", Architecture: "amd64", Path: "pool/main/a/a_1_amd64.deb"}}}
	for _, d := range []string{"bookworm", "stable"} {
		m.Files = append(m.Files, manifest.File{Path: "dists/" + d + "/InRelease", SHA256: "aa"},
			manifest.File{Path: "dists/" + d + "/main/binary-amd64/Packages", SHA256: "bb"})
	}
	got := sourcesEntry("http://apt.example.test/", "", derivePage(m).suites)
	if want := "Types: deb\nURIs: http://apt.example.test/\nSuites: bookworm\nComponents: main\n"; got != want {
		t.Fatalf("sources entry\n%s\nwant\n%s", got, want)
	}
}

// TestPageSchemeFollowsTLS: an edge that serves HTTPS names https in the page's entry
// even to a plain HTTP request, with its HTTPS port.
func TestPageSchemeFollowsTLS(t *testing.T) {
	var ctx fasthttp.RequestCtx
	for _, c := range []struct{ tls, raw, want string }{
		{"", "apt.example.test:8080", "http://apt.example.test:8080"},
		{":443", "apt.example.test:8080", "https://apt.example.test"},
		{"127.0.0.1:8443", "apt.example.test", "https://apt.example.test:8443"},
	} {
		scheme, authority := pageAuthority(&ctx, []byte("apt.example.test"), []byte(c.raw), c.tls)
		if got := scheme + "://" + authority; got != c.want {
			t.Errorf("tls_listen %q, Host %q: %s, want %s", c.tls, c.raw, got, c.want)
		}
	}
}

func TestHostPort(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"apt.example.test", ""}, {"apt.example.test:8080", "8080"}, {"a:08080", "8080"}, {"a:0", ""},
		{"a:65536", ""}, {"a:", ""}, {"a:x", ""}, {"[::1]:443", "443"}, {"[::1]", ""}, {"::1", ""},
		{"a:1:2", ""}, {"a:123456", ""},
	} {
		if got := hostPort([]byte(c.in)); got != c.want {
			t.Errorf("hostPort(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

func TestHumanSize(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {812 * 1024, "812 KiB"}, {5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}} {
		if got := humanSize(c.n); got != c.want {
			t.Errorf("humanSize(%d) = %q; want %q", c.n, got, c.want)
		}
	}
}

// FuzzPage: whatever the query string and Host header, the page renders well-formed
// (everything escaped), the query is bounded, and the authority it names holds only
// the characters of a hostname, an IPv6 literal and a port.
func FuzzPage(f *testing.F) {
	for _, c := range [][2]string{
		{"q=hello", "apt.example.test"}, {"q=%3Cb%3E&q=x", "APT.example.test:8080"}, {"q=a+b+%22c%27", "[::1]:443"},
		{"q=" + strings.Repeat("x", pageMaxQuery+1), "127.0.0.1:0"}, {"q=%ff%fe", "bücher.example:99999"}, {"", ":80"},
	} {
		f.Add(c[0], c[1])
	}
	tree := aptTree("demo", 1)
	tree[`pool/main/x/<b>&"x"/<i>'_1_amd64.deb`] = []byte("odd")
	r := makeRelease(f, newTestStore(), "demo", "2026-11-20T10:00:00Z", tree)
	fs := feedSite("demo", []string{hostA}, r)
	now := time.Now()
	rm := buildRoutes(fs, map[string]*release{r.sum: {sum: r.sum, m: r.m}}, now, nil)
	s := &site{repository: "demo", name: hostA, active: *fs.Active, routes: rm, page: newPageSite(nil, rm, nil, now)}
	f.Fuzz(func(t *testing.T, rawQuery, rawHost string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("/?" + rawQuery)
		query, herr := pageQuery(&ctx)
		if herr != nil {
			if len(ctx.QueryArgs().Peek("q")) <= pageMaxQuery {
				t.Fatalf("query %q refused: %s", rawQuery, herr.body)
			}
			return
		}
		h, err := appendHost(nil, []byte(rawHost))
		if err != nil {
			return
		}
		scheme, authority := pageAuthority(&ctx, h, []byte(rawHost), "")
		if scheme != "http" || strings.Trim(authority, "abcdefghijklmnopqrstuvwxyz0123456789.-:[]") != "" {
			t.Fatalf("Host %q gives %s://%s", rawHost, scheme, authority)
		}
		wellFormed(t, renderPage(s, scheme+"://"+authority+"/", authority, query))
	})
}

// TestPageBound: a list longer than pageMaxRows shows its first pageMaxRows rows and
// says so; the count is of every match.
func TestPageBound(t *testing.T) {
	m := &manifest.Manifest{Date: "2026-11-20T10:00:00Z", Files: []manifest.File{{Path: "dists/stable/main/binary-amd64/Packages"}}}
	for i := range pageMaxRows + 500 {
		name := fmt.Sprintf("pkg%05d", i)
		m.Packages = append(m.Packages, manifest.Package{Suite: "stable", Component: "main", Name: name, Version: "1",
			Architecture: "amd64", Path: "pool/main/p/" + name + "/" + name + "_1_amd64.deb", Size: 1})
	}
	rm := &routeMap{release: m, dirs: map[string]*dirIndex{}}
	s := &site{repository: "demo", active: api.RouteActive{ID: "x", ActivatedAt: time.Unix(1e9, 0)}, routes: rm}
	body := renderPage(s, "http://apt.example.test/", "apt.example.test", "")
	wellFormed(t, body)
	if n := bytes.Count(body, []byte("<tr><td><a href=")); n != pageMaxRows {
		t.Errorf("%d rows; want %d", n, pageMaxRows)
	}
	wantContains(t, "bounded page", body, fmt.Sprintf("%d packages.", pageMaxRows+500),
		fmt.Sprintf("The first %d are listed: search to narrow the list.", pageMaxRows), "pkg00999_1_amd64.deb")
	body = renderPage(s, "http://apt.example.test/", "apt.example.test", "pkg010")
	if n := bytes.Count(body, []byte("<tr><td><a href=")); n != 100 || bytes.Contains(body, []byte("search to narrow")) {
		t.Errorf("search for pkg010 lists %d rows; want 100, without the note", n)
	}
}

// BenchmarkPage: deriving and rendering the page of a release of 100,000 packages
// (once per release), then a search over them (each query request).
func BenchmarkPage(b *testing.B) {
	m := &manifest.Manifest{Date: "2026-11-20T10:00:00Z", Files: []manifest.File{{Path: "dists/stable/main/binary-amd64/Packages"}}}
	for i := range 100000 {
		name := fmt.Sprintf("package-%06d", i)
		m.Packages = append(m.Packages, manifest.Package{Suite: "stable", Component: "main", Name: name, Version: "1.0-1",
			Architecture: "amd64", Path: "pool/main/p/" + name + "/" + name + "_1.0-1_amd64.deb", Size: 12345})
	}
	site := func() *site {
		return &site{repository: "demo", active: api.RouteActive{ID: "x", ActivatedAt: time.Unix(1e9, 0)},
			routes: &routeMap{release: m, dirs: map[string]*dirIndex{}}}
	}
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			renderPage(site(), "http://apt.example.test/", "apt.example.test", "")
		}
	})
	s := site()
	renderPage(s, "http://apt.example.test/", "apt.example.test", "")
	b.Run("search", func(b *testing.B) {
		for b.Loop() {
			renderPage(s, "http://apt.example.test/", "apt.example.test", "package-0999")
		}
	})
}
