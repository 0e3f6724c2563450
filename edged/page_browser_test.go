package edged

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/manifest"
)

// chromium runs headless Chromium (Debian's package) with args, JavaScript off, in a
// throwaway profile, and returns its standard output. --no-sandbox lets it run as root
// (as in a CI container), --disable-dev-shm-usage with a small /dev/shm.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	need(t, "chromium")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-javascript", "--no-first-run",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--no-proxy-server"}
	cmd := exec.CommandContext(ctx, "chromium", append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

// domPage is what a browser made of the page: its visible text and elements by id.
type domPage struct {
	text  string            // the body's text, as the browser has it
	byID  map[string]string // text of each element with an id
	links []string          // every href
}

func readDOM(t *testing.T, dom []byte) domPage {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(dom))
	if err != nil {
		t.Fatalf("parse Chromium's DOM: %v", err)
	}
	p := domPage{byID: map[string]string{}}
	var text func(n *html.Node, b *strings.Builder)
	text = func(n *html.Node, b *strings.Builder) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		if n.Type == html.ElementNode && (n.Data == "style" || n.Data == "script" || n.Data == "head") {
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			text(c, b)
		}
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				switch a.Key {
				case "id":
					var b strings.Builder
					text(n, &b)
					p.byID[a.Val] = b.String()
				case "href":
					p.links = append(p.links, a.Val)
				}
			}
			if n.Data == "body" {
				var b strings.Builder
				text(n, &b)
				p.text = b.String()
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return p
}

// TestPageInChromium: the real Chromium, without JavaScript, renders the repository
// page of a real signed repository served by the edge: its text holds the .sources
// entry, the key command and the key's fingerprint, and its screenshot is a page, not a
// blank. Following the page as a person would works: a package link gives the .deb, the
// search form's GET filters the list, the key command (run with curl, into a temporary
// directory instead of /usr/share/keyrings) fetches the key, and the .sources entry,
// pasted into a throwaway apt, lets apt-get update verify and read the repository
// through the edge.
func TestPageInChromium(t *testing.T) {
	need(t, "curl")
	tree := signedAptRepo(t)
	cas := newTestStore()
	e, _, _ := pageEdgeServing(t, cas, debRelease(t, cas, tree), readKey(t, "rsa.pub.asc"))
	base := "http://" + e.addr + "/"

	raw, body := get(t, e.addr, "GET", "127.0.0.1", "/")
	wantStatus(t, "GET /", raw, body, 200)
	if bytes.Contains(bytes.ToLower(body), []byte("<script")) {
		t.Fatalf("the page carries a script; it must work without:\n%s", body)
	}

	page := readDOM(t, chromium(t, "--dump-dom", base))
	for _, want := range []string{
		"Types: deb\nURIs: " + base + "\nSuites: stable\nComponents: main\nSigned-By: /usr/share/keyrings/demo-archive-keyring.gpg\n",
		"sudo curl -fsSL -o /usr/share/keyrings/demo-archive-keyring.gpg " + base + "demo-archive-keyring.gpg",
		rsaFingerprint,
		"natpmpc20150609-7.1+b2amd64stable/main",
		"natpmp-utils20150609-7.1allstable/main",
		"Active release",
		"4 packages.",
	} {
		if !strings.Contains(page.text, want) {
			t.Errorf("Chromium's text of the page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("page text:\n%s", page.text)
	}

	// A package link gives the package.
	var deb string
	for _, l := range page.links {
		if strings.HasSuffix(l, "natpmpc_20150609-7.1+b2_amd64.deb") {
			deb = l
		}
	}
	if deb == "" {
		t.Fatalf("no link to natpmpc's .deb among %q", page.links)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := url.Parse(deb)
	if err != nil {
		t.Fatal(err)
	}
	link := u.ResolveReference(ref)
	resp, got := get(t, e.addr, "GET", "127.0.0.1", link.RequestURI())
	wantStatus(t, "GET "+link.String(), resp, got, 200)
	if want := tree["pool/main/n/natpmp/natpmpc_20150609-7.1+b2_amd64.deb"]; !bytes.Equal(got, want) {
		t.Fatalf("%s gave %d bytes, not the .deb (%d bytes)", link, len(got), len(want))
	}

	// The search form, submitted as a browser does (a GET with q), filters the list.
	found := readDOM(t, chromium(t, "--dump-dom", base+"?q=natpmpc"))
	if !strings.Contains(found.text, "1 of 4 packages matches") || !strings.Contains(found.text, "natpmpc20150609") ||
		strings.Contains(found.text, "libnatpmp1") {
		t.Fatalf("search for natpmpc shows:\n%s", found.text)
	}

	// A screenshot: the size asked for, and mostly background but with text in it.
	shot := filepath.Join(t.TempDir(), "page.png")
	chromium(t, "--screenshot="+shot, "--window-size=1200,1400", "--hide-scrollbars", base)
	checkScreenshot(t, shot, 1200, 1400)

	// The key command, run as the page shows it (but into a temporary directory).
	keyrings := t.TempDir()
	cmd := strings.Fields(page.byID["key-command"])
	if len(cmd) != 6 || cmd[0] != "sudo" || cmd[1] != "curl" || cmd[3] != "-o" {
		t.Fatalf("key command %q: want sudo curl <flags> -o <path> <url>", page.byID["key-command"])
	}
	keyring := filepath.Join(keyrings, filepath.Base(cmd[4]))
	if out, err := exec.Command("curl", cmd[2], "-o", keyring, cmd[5]).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd[1:], err, out)
	}

	// The .sources entry, pasted as it is but for the keyring's directory.
	sources := strings.ReplaceAll(page.byID["sources"], "/usr/share/keyrings/", keyrings+"/")
	apt := apttest.New(t, apttest.Options{SourcesText: sources})
	apt.Update(t)
	if got := apt.Policy(t, "natpmp-utils"); got != "20150609-7.1" {
		t.Fatalf("natpmp-utils candidate %q; want 20150609-7.1", got)
	}
}

// checkScreenshot fails unless the PNG at path is w×h and shows a page: a light
// background over most of it, and dark pixels (text) over a fair part.
func checkScreenshot(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("Chromium wrote no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if b := img.Bounds(); b != image.Rect(0, 0, w, h) {
		t.Fatalf("screenshot is %v; want %dx%d", b, w, h)
	}
	var light, dark int
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			g := color.GrayModel.Convert(img.At(x, y)).(color.Gray).Y
			switch {
			case g > 0xe0:
				light++
			case g < 0x80:
				dark++
			}
		}
	}
	total := w * h
	if light < total/2 || dark < total/200 {
		t.Fatalf("screenshot looks blank or broken: %d light and %d dark pixels of %d", light, dark, total)
	}
}

// debRelease is makeRelease with each pool file's package named as its file name says
// (name_version_architecture.deb), as armor build would record it.
func debRelease(t *testing.T, cas *testStore, tree map[string][]byte) *rel {
	t.Helper()
	m := &manifest.Manifest{Schema: manifest.SchemaVersion, Repository: "demo", Date: "2026-11-20T10:00:00Z"}
	for p, data := range tree {
		sum := cas.put(t, data)
		if !strings.HasPrefix(p, "pool/") {
			m.Files = append(m.Files, manifest.File{Path: p, Size: int64(len(data)), SHA256: sum})
			continue
		}
		f := strings.Split(strings.TrimSuffix(filepath.Base(p), ".deb"), "_")
		if len(f) != 3 {
			t.Fatalf("pool file %s is not name_version_arch.deb", p)
		}
		m.Packages = append(m.Packages, manifest.Package{Suite: "stable", Component: "main", Name: f[0], Version: f[1],
			Architecture: f[2], Path: p, Size: int64(len(data)), SHA256: sum})
	}
	if err := manifest.Seal(m); err != nil {
		t.Fatalf("seal manifest: %v", err)
	}
	b, err := manifest.Marshal(m)
	if err != nil {
		t.Fatalf("marshal manifest: %v", err)
	}
	return &rel{m: m, sum: cas.put(t, b), files: tree}
}
