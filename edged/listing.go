package edged

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// dirIndex is one directory of a release's tree, as its listing shows it: directories
// first, then files, each group sorted by name (as nginx's autoindex does). Built once
// per routing map (buildDirs), never per request.
type dirIndex struct {
	entries []dirEntry
	// sum fingerprints what the listing shows (each entry's name, kind, size and date);
	// the listing's Last-Modified is when that content first appeared, dated as a path
	// of the tree is (datedDirs), so wget -N fetches only the listings that changed.
	sum          string
	modTime      int64 // unix seconds; 0: none
	lastModified []byte
}

type dirEntry struct {
	name    string
	dir     bool
	size    int64     // files only
	modTime int64     // unix seconds; for a directory the latest of what it holds; 0: none
	sub     *dirIndex // while building: the directory's own index
}

// buildDirs makes the directory tree of a release's paths (the active release only:
// retained releases' by-hash/ and pool/ paths are served but not listed, so a mirror
// of the listings is the release). The root is "".
func buildDirs(paths map[string]*route) map[string]*dirIndex {
	root := &dirIndex{}
	dirs := map[string]*dirIndex{"": root}
	var ensure func(dir string) *dirIndex
	ensure = func(dir string) *dirIndex {
		if d := dirs[dir]; d != nil {
			return d
		}
		d := &dirIndex{}
		dirs[dir] = d
		up, base := splitDir(dir)
		pd := ensure(up)
		pd.entries = append(pd.entries, dirEntry{name: base, dir: true, sub: d})
		return d
	}
	for p, r := range paths {
		parent, name := splitDir(p)
		d := ensure(parent)
		d.entries = append(d.entries, dirEntry{name: name, size: r.size, modTime: r.modTime})
	}
	finishDir(root)
	return dirs
}

// finishDir sorts a directory's entries, dates its subdirectories (each by the latest
// date of what it holds) and returns its own date.
func finishDir(d *dirIndex) int64 {
	var latest int64
	for i := range d.entries {
		e := &d.entries[i]
		if e.sub != nil {
			e.modTime = finishDir(e.sub)
			e.sub = nil // not needed once dated
		}
		latest = max(latest, e.modTime)
	}
	sortEntries(d.entries)
	h := sha256.New()
	for _, e := range d.entries {
		fmt.Fprintf(h, "%q %t %d %d\n", e.name, e.dir, e.size, e.modTime)
	}
	d.sum = hex.EncodeToString(h.Sum(nil))
	return latest
}

func sortEntries(es []dirEntry) {
	slices.SortFunc(es, func(a, b dirEntry) int {
		if a.dir != b.dir {
			if a.dir {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
}

func splitDir(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

var (
	ctHTML    = []byte("text/html; charset=utf-8")
	hLocation = []byte("Location")
	hVary     = []byte("Vary")
	vAccept   = []byte("Accept")
	mimeJSON  = []byte("application/json")
)

// serveDir answers a request for a directory of the site: with a trailing slash its
// listing (HTML, or JSON when the client accepts application/json), without one a 301
// to the path with the slash, as nginx does. The root also lists the site's keyrings.
func serveDir(ctx *fasthttp.RequestCtx, s *site, p []byte, d *dirIndex, slash bool) (int, int64) {
	resp := &ctx.Response.Header
	if !slash {
		resp.SetCanonical(hLocation, []byte(escapePath(string(p))+"/"))
		resp.SetCanonical(hCacheControl, ccShort)
		ctx.SetStatusCode(fasthttp.StatusMovedPermanently)
		return fasthttp.StatusMovedPermanently, 0
	}
	entries := d.entries
	lr := &route{modTime: d.modTime, lastModified: d.lastModified, cacheControl: ccShort}
	if len(p) == 0 && len(s.extra) > 0 {
		entries = slices.Clone(entries)
		for name, r := range s.extra {
			entries = append(entries, dirEntry{name: name, size: r.size, modTime: r.modTime})
			if r.modTime > lr.modTime {
				lr.modTime, lr.lastModified = r.modTime, r.lastModified
			}
		}
		sortEntries(entries)
	}
	lr.settled = lr.modTime + settleSeconds
	var body []byte
	if bytes.Contains(ctx.Request.Header.PeekCanonical(hAccept), mimeJSON) {
		body = listingJSON(entries)
		resp.SetContentTypeBytes(ctJSON)
	} else {
		body = listingHTML(string(p), entries)
		resp.SetContentTypeBytes(ctHTML)
	}
	sum := sha256.Sum256(body)
	lr.etag = []byte(`"` + hex.EncodeToString(sum[:]) + `"`)
	lm := lr.lastModifiedAt(ctx.Time().Unix())
	setValidators(resp, lr, lm)
	resp.SetCanonical(hVary, vAccept)
	if notModified(&ctx.Request.Header, lr, lm, ctx.Time().Unix()) {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return fasthttp.StatusNotModified, 0
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.SetBodyRaw(body)
	if ctx.Request.Header.IsHead() {
		return fasthttp.StatusOK, 0
	}
	return fasthttp.StatusOK, int64(len(body))
}

var hAccept = []byte(fasthttp.HeaderAccept)

// escapePath percent-escapes each segment of a tree path and adds the leading slash.
func escapePath(p string) string {
	if p == "" {
		return "/"
	}
	var b strings.Builder
	for seg := range strings.SplitSeq(p, "/") {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(seg))
	}
	return b.String()
}

// listingHTML renders a listing as nginx's autoindex does: a <pre> of links with the
// date and size of each entry. Names are escaped for the URL and for HTML.
func listingHTML(dir string, entries []dirEntry) []byte {
	title := html.EscapeString(escapePathDisplay(dir))
	var b bytes.Buffer
	b.WriteString("<html>\r\n<head><title>Index of " + title + "</title></head>\r\n<body>\r\n<h1>Index of " + title +
		"</h1><hr><pre><a href=\"../\">../</a>\r\n")
	for _, e := range entries {
		name, href := e.name, url.PathEscape(e.name)
		if strings.IndexByte(href, ':') >= 0 {
			href = "./" + href // not to be read as a scheme
		}
		if e.dir {
			name += "/"
			href += "/"
		}
		b.WriteString(`<a href="` + html.EscapeString(href) + `">` + html.EscapeString(name) + "</a>")
		b.WriteString(strings.Repeat(" ", max(51-len([]rune(name)), 1)))
		if e.modTime != 0 {
			b.WriteString(time.Unix(e.modTime, 0).UTC().Format("02-Jan-2006 15:04"))
		} else {
			b.WriteString("                 ")
		}
		size := "-"
		if !e.dir {
			size = strconv.FormatInt(e.size, 10)
		}
		b.WriteString(strings.Repeat(" ", max(20-len(size), 1)) + size + "\r\n")
	}
	b.WriteString("</pre><hr></body>\r\n</html>\r\n")
	return b.Bytes()
}

func escapePathDisplay(dir string) string {
	if dir == "" {
		return "/"
	}
	return "/" + dir + "/"
}

// listingEntry is one entry of a JSON listing, in nginx's autoindex_format json.
type listingEntry struct {
	Name  string `json:"name"`
	Type  string `json:"type"` // "directory" or "file"
	MTime string `json:"mtime,omitempty"`
	Size  *int64 `json:"size,omitempty"` // files only
}

func listingJSON(entries []dirEntry) []byte {
	out := make([]listingEntry, 0, len(entries))
	for _, e := range entries {
		le := listingEntry{Name: e.name, Type: "file"}
		if e.dir {
			le.Type = "directory"
		} else {
			le.Size = &e.size
		}
		if e.modTime != 0 {
			le.MTime = time.Unix(e.modTime, 0).UTC().Format(http.TimeFormat)
		}
		out = append(out, le)
	}
	b, _ := json.Marshal(out)
	return append(b, '\n')
}
