package edged

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/valyala/fasthttp"

	"github.com/armor-apt/armor/manifest"
)

// The repository page is what "/" of a hostname answers a person (a client that
// accepts JSON still gets the root's listing): how to use the repository (the deb822
// .sources entry with Signed-By, the curl command that fetches the key), the key's
// fingerprints, the suites, components and architectures, the active release and when
// it was activated, and the packages with their versions, each linking to its .deb,
// searchable without JavaScript by a GET form (/?q=term filters the list on the edge).
// The root's files (dists/, pool/, the keyrings) are linked at the end, so the page
// leads a mirroring crawler (wget -m) into the tree as the root listing did.
//
// It is rendered from the active release's manifest, the repository's keys from the
// routes feed and the request's scheme and host (the .sources entry names them), never
// from the store. The plain page (no query) of each (host, scheme) is rendered once
// per site and kept in the object cache under its SHA-256 like any object, so it is
// bounded by the cache and re-rendered, identically, if evicted. Pages of a query are
// rendered for each request and not cached: a client choosing queries must not be able
// to fill the cache.
//
// Validators: the ETag is the page's SHA-256. Last-Modified is the later of the
// activation and the moment this edge first served the site's current keys (its start,
// or the feed change that brought them), since a key can change without a new release;
// it follows the settle rule of every other path that can change (table.go).

//go:embed page.html.tmpl
var pageTemplateText string

var pageTemplate = template.Must(template.New("page").Parse(pageTemplateText))

const (
	// pageMaxRows bounds the packages one page lists; beyond it the page says how many
	// matched and asks for a narrower search.
	pageMaxRows = 1000
	// pageMaxQuery bounds the search query, in bytes.
	pageMaxQuery = 200
	// pageMaxRendered bounds the (host, scheme) variants of a site's plain page that are
	// remembered; further variants (odd Host ports) are rendered for each request.
	pageMaxRendered = 64
)

var errQueryTooLong = &httpError{status: 400, body: []byte("search query longer than " + strconv.Itoa(pageMaxQuery) + " bytes\n")}

// pageSite is a site's page state: what one routing table knows of the page.
type pageSite struct {
	// since is the unix second from which the site's keys have been served by this
	// edge (see the validators above).
	since  int64
	keys   []string
	routes *routeMap

	keysOnce sync.Once
	keyViews []keyView

	mu       sync.Mutex
	rendered map[string]*route // plain page by "scheme://host/": body in the object cache
}

// newPageSite makes the page state of a site with keys and routing map rm. prev is the
// same repository's page state in the previous table (nil: none); its date carries over
// while the keys are the same, and its rendered pages too while the routing map is also
// the same (the page then is too), so a feed change elsewhere renders nothing again.
func newPageSite(keys []string, rm *routeMap, prev *pageSite, now time.Time) *pageSite {
	ps := &pageSite{since: now.Unix(), keys: keys, routes: rm, rendered: map[string]*route{}}
	if prev != nil && slices.Equal(prev.keys, keys) {
		ps.since = prev.since
		if prev.routes == rm {
			prev.mu.Lock()
			maps.Copy(ps.rendered, prev.rendered)
			prev.mu.Unlock()
		}
	}
	return ps
}

// pageRelease is what the page shows of a release, derived from its manifest once per
// routing map (pageData).
type pageRelease struct {
	suites   []suiteView
	packages []pkgView // sorted by name, suite, component, version, architecture
	date     string    // the manifest's build date, as written
}

type suiteView struct {
	Name          string
	Components    []string
	Architectures []string
	Source        bool // every component has a Sources index: deb-src works
}

type pkgView struct {
	Name, Version, Architecture, Suite, Component string
	Href                                          string // absolute, percent-escaped path of the .deb
	Size                                          string // for people: "812 KiB"
	search                                        string // lowercase "name version arch suite/component"
}

type keyView struct {
	Fingerprint string // uppercase hex, as gpg --show-keys prints it
	UserIDs     []string
	Err         string // the key could not be read
}

type fileView struct {
	Name, Href string
}

// pageView is the template's data.
type pageView struct {
	Repository    string
	Base          string // scheme://host/
	Host          string
	Keyring       string // <repository>-archive-keyring.gpg, "" when the site has no keys
	KeyringPath   string
	SourcesPath   string
	Sources       string
	Keys          []keyView
	ReleaseID     string
	Activated     time.Time
	Built         string
	Suites        []suiteView
	Query         string
	Packages      []pkgView
	Total         int // packages in the release
	Matched       int // packages the query matched (Total without one)
	Truncated     bool
	Files         []fileView
	ActivatedISO  string
	ActivatedText string
}

// pageData returns the routing map's page data, deriving it on first use.
func (rm *routeMap) pageData() *pageRelease {
	rm.pageOnce.Do(func() { rm.page = derivePage(rm.release) })
	return rm.page
}

// derivePage reads what the page shows from a manifest: suites are the dists/<suite>/
// directories holding an InRelease or Release (and the suites packages name),
// components and architectures the <component>/binary-<arch>/Packages indexes under
// them (debian-installer indexes count for their component).
func derivePage(m *manifest.Manifest) *pageRelease {
	pr := &pageRelease{}
	if m == nil {
		return pr
	}
	pr.date = m.Date
	suites := map[string]bool{}
	for _, p := range m.Packages {
		suites[p.Suite] = true
	}
	for _, f := range m.Files {
		rest, ok := strings.CutPrefix(f.Path, "dists/")
		if !ok || strings.Contains(rest, "/by-hash/") {
			continue
		}
		if s, ok := strings.CutSuffix(rest, "/InRelease"); ok {
			suites[s] = true
		} else if s, ok := strings.CutSuffix(rest, "/Release"); ok && !strings.Contains(s, "/binary-") && !strings.HasSuffix(s, "/source") {
			suites[s] = true
		}
	}
	names := make([]string, 0, len(suites))
	for s := range suites {
		names = append(names, s)
	}
	// Longest first, so a path is given to the most specific suite that holds it.
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	type sets struct{ comps, archs, source map[string]bool }
	found := map[string]*sets{}
	for _, s := range names {
		found[s] = &sets{map[string]bool{}, map[string]bool{}, map[string]bool{}}
	}
	for _, f := range m.Files {
		rest, ok := strings.CutPrefix(f.Path, "dists/")
		if !ok || strings.Contains(rest, "/by-hash/") {
			continue
		}
		dir, base := splitDir(rest)
		if base != "Packages" && !strings.HasPrefix(base, "Packages.") && base != "Sources" && !strings.HasPrefix(base, "Sources.") {
			continue
		}
		i := slices.IndexFunc(names, func(s string) bool { return strings.HasPrefix(dir, s+"/") })
		if i < 0 {
			continue
		}
		st := found[names[i]]
		compDir, last := splitDir(dir[len(names[i])+1:])
		comp := strings.TrimSuffix(compDir, "/debian-installer")
		switch {
		case comp == "" || comp == "debian-installer":
		case last == "source" && strings.HasPrefix(base, "Sources"):
			st.comps[comp] = true
			st.source[comp] = true
		case strings.HasPrefix(last, "binary-") && strings.HasPrefix(base, "Packages"):
			st.comps[comp] = true
			st.archs[strings.TrimPrefix(last, "binary-")] = true
		}
	}
	for s, st := range found {
		sv := suiteView{Name: s, Components: sortedKeys(st.comps), Architectures: sortedKeys(st.archs)}
		sv.Source = len(st.source) > 0 && len(st.source) == len(st.comps)
		pr.suites = append(pr.suites, sv)
	}
	slices.SortFunc(pr.suites, func(a, b suiteView) int { return strings.Compare(a.Name, b.Name) })
	pr.packages = make([]pkgView, 0, len(m.Packages))
	for _, p := range m.Packages {
		pr.packages = append(pr.packages, pkgView{
			Name: p.Name, Version: p.Version, Architecture: p.Architecture, Suite: p.Suite, Component: p.Component,
			Href: escapePath(p.Path), Size: humanSize(p.Size),
			search: strings.ToLower(p.Name + " " + p.Version + " " + p.Architecture + " " + p.Suite + "/" + p.Component),
		})
	}
	slices.SortFunc(pr.packages, func(a, b pkgView) int {
		switch {
		case a.Name != b.Name:
			return strings.Compare(a.Name, b.Name)
		case a.Suite != b.Suite:
			return strings.Compare(a.Suite, b.Suite)
		case a.Component != b.Component:
			return strings.Compare(a.Component, b.Component)
		case a.Version != b.Version:
			return strings.Compare(a.Version, b.Version)
		case a.Architecture != b.Architecture:
			return strings.Compare(a.Architecture, b.Architecture)
		}
		return strings.Compare(a.Href, b.Href)
	})
	return pr
}

// humanSize writes a size in bytes, KiB, MiB or GiB, with one decimal below 10.
func humanSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " " + unit
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sourcesEntry is the deb822 .sources text for the suites: one stanza per distinct
// (types, components), suites in order.
func sourcesEntry(base, signedBy string, suites []suiteView) string {
	type group struct {
		types, comps string
		suites       []string
	}
	var groups []*group
	for _, s := range suites {
		if len(s.Components) == 0 {
			continue
		}
		types := "deb"
		if s.Source {
			types = "deb deb-src"
		}
		comps := strings.Join(s.Components, " ")
		i := slices.IndexFunc(groups, func(g *group) bool { return g.types == types && g.comps == comps })
		if i < 0 {
			groups = append(groups, &group{types: types, comps: comps})
			i = len(groups) - 1
		}
		groups[i].suites = append(groups[i].suites, s.Name)
	}
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "Types: %s\nURIs: %s\nSuites: %s\nComponents: %s\n", g.types, base, strings.Join(g.suites, " "), g.comps)
		if signedBy != "" {
			fmt.Fprintf(&b, "Signed-By: %s\n", signedBy)
		}
	}
	return b.String()
}

// views reads the fingerprints and user IDs of the site's armored keys.
func (ps *pageSite) views() []keyView {
	ps.keysOnce.Do(func() {
		for i, k := range ps.keys {
			ents, err := openpgp.ReadArmoredKeyRing(strings.NewReader(k))
			if err != nil || len(ents) == 0 {
				ps.keyViews = append(ps.keyViews, keyView{Err: fmt.Sprintf("key %d of the routes feed cannot be read", i+1)})
				continue
			}
			for _, ent := range ents {
				kv := keyView{Fingerprint: strings.ToUpper(hex.EncodeToString(ent.PrimaryKey.Fingerprint))}
				for name := range ent.Identities {
					kv.UserIDs = append(kv.UserIDs, name)
				}
				slices.Sort(kv.UserIDs)
				ps.keyViews = append(ps.keyViews, kv)
			}
		}
	})
	return ps.keyViews
}

// pageQuery returns the request's search query, its words joined by single spaces.
// Bytes that are not UTF-8 and control characters become U+FFFD.
func pageQuery(ctx *fasthttp.RequestCtx) (string, *httpError) {
	q := ctx.QueryArgs().Peek("q")
	if len(q) > pageMaxQuery {
		return "", errQueryTooLong
	}
	// What is echoed must be valid UTF-8 without control characters, as the page is.
	clean := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(string(q), "\uFFFD"))
	return strings.Join(strings.Fields(clean), " "), nil
}

// matchPackages returns the packages every word of query is part of (case-insensitive,
// in name, version, architecture or suite/component), at most pageMaxRows of them, and
// how many matched in all.
func matchPackages(pkgs []pkgView, query string) ([]pkgView, int) {
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 {
		return pkgs[:min(len(pkgs), pageMaxRows)], len(pkgs)
	}
	var out []pkgView
	n := 0
	for _, p := range pkgs {
		ok := true
		for _, w := range words {
			if !strings.Contains(p.search, w) {
				ok = false
				break
			}
		}
		if ok {
			if n < pageMaxRows {
				out = append(out, p)
			}
			n++
		}
	}
	return out, n
}

// pageAuthority is the scheme, the host and any port of the request as the page
// names them in URLs: the normalised hostname (an IPv6 literal in brackets) and the
// Host header's port unless it is the scheme's default.
func pageAuthority(ctx *fasthttp.RequestCtx, host, rawHost []byte) (scheme, authority string) {
	scheme = "http"
	if ctx.IsTLS() {
		scheme = "https"
	}
	authority = string(host)
	if strings.IndexByte(authority, ':') >= 0 {
		authority = "[" + authority + "]"
	}
	if port := hostPort(rawHost); port != "" && !(scheme == "http" && port == "80") && !(scheme == "https" && port == "443") {
		authority += ":" + port
	}
	return scheme, authority
}

// hostPort returns the port of a Host header ("" when none or not a valid port).
func hostPort(h []byte) string {
	var port []byte
	if len(h) > 0 && h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 0 || end+1 >= len(h) || h[end+1] != ':' {
			return ""
		}
		port = h[end+2:]
	} else {
		if bytes.Count(h, []byte(":")) != 1 {
			return ""
		}
		port = h[bytes.IndexByte(h, ':')+1:]
	}
	n, ok := parseDigits(port)
	if !ok || len(port) > 5 || n < 1 || n > 65535 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// renderPage renders the page of site s for base ("scheme://authority/") and query.
func renderPage(s *site, base, host, query string) []byte {
	pr := s.routes.pageData()
	v := pageView{
		Repository: s.repository, Base: base, Host: host,
		ReleaseID: s.active.ID, Activated: s.active.ActivatedAt.UTC(), Built: pr.date,
		Suites: pr.suites, Query: query, Total: len(pr.packages),
		SourcesPath: "/etc/apt/sources.list.d/" + s.repository + ".sources",
	}
	v.ActivatedISO = v.Activated.Format(time.RFC3339)
	v.ActivatedText = v.Activated.Format("2006-01-02 15:04:05 UTC")
	signedBy := ""
	if _, ok := s.extra[s.repository+"-archive-keyring.gpg"]; ok {
		v.Keyring = s.repository + "-archive-keyring.gpg"
		v.KeyringPath = "/usr/share/keyrings/" + v.Keyring
		signedBy = v.KeyringPath
	}
	if s.page != nil {
		v.Keys = s.page.views()
	}
	v.Sources = sourcesEntry(base, signedBy, pr.suites)
	v.Packages, v.Matched = matchPackages(pr.packages, query)
	v.Truncated = v.Matched > len(v.Packages)
	for _, e := range rootEntries(s) {
		href := url.PathEscape(e.name)
		if strings.IndexByte(href, ':') >= 0 {
			href = "./" + href
		}
		name := e.name
		if e.dir {
			name, href = name+"/", href+"/"
		}
		v.Files = append(v.Files, fileView{Name: name, Href: href})
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, v); err != nil {
		// The template and its data are the edge's own: a failure is a bug.
		panic(fmt.Sprintf("render repository page: %v", err))
	}
	return b.Bytes()
}

// rootEntries are the entries of the root listing: the release's root and the keyrings.
func rootEntries(s *site) []dirEntry {
	var entries []dirEntry
	if d := s.routes.dirs[""]; d != nil {
		entries = d.entries
	}
	if len(s.extra) > 0 {
		entries = slices.Clone(entries)
		for name, r := range s.extra {
			if _, shadowed := s.routes.paths[name]; !shadowed {
				entries = append(entries, dirEntry{name: name, size: r.size})
			}
		}
		sortEntries(entries)
	}
	return entries
}

// pageRoute makes the route of a rendered page: validators, type and cache policy.
func (s *site) pageRoute(body []byte) *route {
	sum := sha256.Sum256(body)
	hexSum := hex.EncodeToString(sum[:])
	r := &route{sum: hexSum, key: cacheKey(hexSum), size: int64(len(body)), etag: []byte(`"` + hexSum + `"`),
		contentType: ctHTML, cacheControl: ccShort}
	t := s.active.ActivatedAt.Unix()
	if s.page != nil {
		t = max(t, s.page.since)
	}
	if t > 0 {
		r.modTime, r.settled = t, t+settleSeconds
		r.lastModified = []byte(time.Unix(t, 0).UTC().Format(http.TimeFormat))
	}
	return r
}

// servePage answers "/" of site s with the repository page; host is the request's
// normalised hostname, rawHost the host as the request gave it (Host header or
// absolute-form target).
func (e *Edge) servePage(ctx *fasthttp.RequestCtx, s *site, host, rawHost []byte) (int, int64, *httpError) {
	query, herr := pageQuery(ctx)
	if herr != nil {
		return 0, 0, herr
	}
	scheme, authority := pageAuthority(ctx, host, rawHost)
	base := scheme + "://" + authority + "/"
	var r *route
	var body []byte
	if query != "" {
		body = renderPage(s, base, authority, query)
		r = s.pageRoute(body)
	} else {
		r, body = e.plainPage(s, base, authority)
	}
	req, resp := &ctx.Request.Header, &ctx.Response.Header
	lm := r.lastModifiedAt(ctx.Time().Unix())
	resp.SetCanonical(hVary, vAccept)
	if notModified(req, r, lm) {
		setValidators(resp, r, lm)
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return fasthttp.StatusNotModified, 0, nil
	}
	setValidators(resp, r, lm)
	resp.SetContentTypeBytes(r.contentType)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.SetBodyRaw(body)
	if req.IsHead() {
		return fasthttp.StatusOK, 0, nil
	}
	return fasthttp.StatusOK, int64(len(body)), nil
}

// plainPage returns the page without a query for base: from the object cache when it
// was rendered before and is still there, else rendered (once, however many requests
// ask at the same moment) and put there.
func (e *Edge) plainPage(s *site, base, host string) (*route, []byte) {
	ps := s.page
	if ps == nil {
		body := renderPage(s, base, host, "")
		return s.pageRoute(body), body
	}
	ps.mu.Lock()
	r := ps.rendered[base]
	ps.mu.Unlock()
	if r != nil {
		if b, ok := e.objects.cache.Get(r.key); ok {
			return r, b
		}
	}
	v, _, _ := e.objects.flights.Do(fmt.Sprintf("page %p %s", ps, base), func() (any, error) {
		body := renderPage(s, base, host, "")
		r := s.pageRoute(body)
		e.objects.cache.Set(r.key, body, int64(len(body)))
		ps.mu.Lock()
		if len(ps.rendered) < pageMaxRendered || ps.rendered[base] != nil {
			ps.rendered[base] = r
		}
		ps.mu.Unlock()
		return renderedPage{r, body}, nil
	})
	rp := v.(renderedPage)
	return rp.r, rp.body
}

type renderedPage struct {
	r    *route
	body []byte
}
