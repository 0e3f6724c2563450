package edged

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestListing: every directory of the active release answers an HTML index with its
// names, sizes and dates (JSON with Accept: application/json); a directory asked for
// without its trailing slash is redirected to it (301), as nginx does.
func TestListing(t *testing.T) {
	cas := newTestStore()
	ctl := newFakeControld(t)
	tree := aptTree("demo", 1)
	tree[`pool/main/x/<b>&"x"/x_1:2_amd64.deb`] = []byte("evil name")
	tree["pool/main/h/hello/hello 1.deb"] = []byte("spaced")
	r := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree)
	old := makeRelease(t, cas, "demo", "2026-11-19T10:00:00Z", aptTree("demo", 0))
	site := feedSite("demo", []string{hostA}, r, old)
	activated := site.Active.ActivatedAt
	v := ctl.set(site)
	e := startEdge(t, testConfig(t, ctl), cas)
	e.waitVersion(t, v)

	resp, body := raw(t, e.addr, "GET /dists HTTP/1.1\r\nHost: "+hostA+"\r\nConnection: close\r\n\r\n")
	wantStatus(t, "/dists", resp, body, 301)
	if loc := resp.Header.Get("Location"); loc != "/dists/" {
		t.Fatalf("/dists redirects to %q; want /dists/", loc)
	}
	resp, body = raw(t, e.addr, "GET //pool//main/x HTTP/1.1\r\nHost: "+hostA+"\r\nConnection: close\r\n\r\n")
	wantStatus(t, "//pool//main/x", resp, body, 301)
	if loc := resp.Header.Get("Location"); loc != "/pool/main/x/" {
		t.Fatalf("//pool//main/x redirects to %q; want /pool/main/x/", loc)
	}

	resp, body = get(t, e.addr, "GET", hostA, "/dists/stable/")
	wantStatus(t, "/dists/stable/", resp, body, 200)
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("listing Content-Type %q", ct)
	}
	html := string(body)
	date := activated.UTC().Format("02-Jan-2006 15:04")
	for _, want := range []string{
		"<title>Index of /dists/stable/</title>",
		`<a href="../">../</a>`,
		`<a href="main/">main/</a>`,
		`<a href="InRelease">InRelease</a>`,
		date,
		" " + strconv.Itoa(len(tree["dists/stable/Release"])) + "\r\n",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("listing of /dists/stable/ lacks %q:\n%s", want, html)
		}
	}
	if strings.Index(html, "main/") > strings.Index(html, "InRelease") {
		t.Errorf("directories are not listed first:\n%s", html)
	}

	// Names are escaped, for the URL and for HTML.
	_, body = get(t, e.addr, "GET", hostA, "/pool/main/x/")
	if !strings.Contains(string(body), `<a href="%3Cb%3E&amp;%22x%22/">&lt;b&gt;&amp;&#34;x&#34;/</a>`) {
		t.Errorf("escaped directory name missing:\n%s", body)
	}
	resp, body = get(t, e.addr, "GET", hostA, "/pool/main/x/%3Cb%3E&%22x%22/")
	wantStatus(t, "listing of the escaped directory", resp, body, 200)
	if !strings.Contains(string(body), `<a href="./x_1:2_amd64.deb">x_1:2_amd64.deb</a>`) {
		t.Errorf("a name with a colon is not made relative:\n%s", body)
	}
	_, body = get(t, e.addr, "GET", hostA, "/pool/main/h/hello/")
	if !strings.Contains(string(body), `<a href="hello%201.deb">hello 1.deb</a>`) {
		t.Errorf("a name with a space is not escaped in its link:\n%s", body)
	}
	// The retained release's pool file is served but not listed.
	if strings.Contains(string(body), "hello_0_amd64.deb") {
		t.Errorf("a retained release's file is listed:\n%s", body)
	}
	if resp, body := get(t, e.addr, "GET", hostA, "/pool/main/h/hello/hello_0_amd64.deb"); resp.StatusCode != 200 {
		t.Fatalf("retained pool file: %d %s", resp.StatusCode, body)
	}

	resp, body = get(t, e.addr, "GET", hostA, "/dists/stable/", "Accept", "application/json")
	wantStatus(t, "JSON listing", resp, body, 200)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("JSON listing Content-Type %q", ct)
	}
	var entries []struct {
		Name, Type, MTime string
		Size              *int64
	}
	if err := json.Unmarshal(body, &entries); err != nil {
		t.Fatalf("JSON listing %s: %v", body, err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name+":"+en.Type)
		if en.MTime != activated.UTC().Format(http.TimeFormat) {
			t.Errorf("%s: mtime %q; want %q", en.Name, en.MTime, activated.UTC().Format(http.TimeFormat))
		}
		if (en.Size != nil) != (en.Type == "file") || en.Size != nil && *en.Size != int64(len(tree["dists/stable/"+en.Name])) {
			t.Errorf("%s: size %v", en.Name, en.Size)
		}
	}
	if got, want := strings.Join(names, " "), "main:directory InRelease:file Release:file Release.gpg:file"; got != want {
		t.Errorf("JSON listing names %s; want %s", got, want)
	}

	resp, body = get(t, e.addr, "HEAD", hostA, "/")
	wantStatus(t, "HEAD /", resp, body, 200)
	if resp.ContentLength <= 0 || len(body) != 0 {
		t.Errorf("HEAD /: Content-Length %d, %d body bytes", resp.ContentLength, len(body))
	}
}

// TestWgetMirror: the real wget -m -np mirrors the whole tree from the listings alone,
// and what it gets is exactly the release's files.
func TestWgetMirror(t *testing.T) {
	need(t, "wget")
	cas := newTestStore()
	ctl := newFakeControld(t)
	tree := aptRepo(t)
	r := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree)
	v := ctl.set(feedSite("demo", []string{"127.0.0.1"}, r))
	e := startEdge(t, testConfig(t, ctl), cas)
	e.waitVersion(t, v)

	dir := t.TempDir()
	got := wgetMirror(t, e.addr, dir)
	for p, want := range tree {
		if !bytes.Equal(got[p], want) {
			t.Errorf("mirrored %s differs from the release's (%d bytes, want %d)", p, len(got[p]), len(want))
		}
	}
	for p := range got {
		if tree[p] == nil {
			t.Errorf("mirror has %s, which the release does not", p)
		}
	}
}

// wgetMirror runs wget -m -np into dir (listings not kept) and returns what it wrote.
func wgetMirror(t *testing.T, addr, dir string, extra ...string) map[string][]byte {
	t.Helper()
	files, _ := wgetMirrorOut(t, addr, dir, extra...)
	return files
}

// wgetMirrorOut is wgetMirror that also returns wget's output.
func wgetMirrorOut(t *testing.T, addr, dir string, extra ...string) (map[string][]byte, string) {
	t.Helper()
	args := append([]string{"-m", "-np", "-nH", "-e", "robots=off", "-R", "index.html*", "--no-proxy", "-P", dir}, extra...)
	cmd := exec.Command("wget", append(args, "http://"+addr+"/")...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wget %v: %v\n%s", args, err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wget output:\n%s", out)
		}
	})
	return readTree(t, dir, nil), string(out)
}
