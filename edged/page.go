package edged

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
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

// pageAuthority is the scheme, the host and any port of the request as the page
// names them in URLs: the normalised hostname (an IPv6 literal in brackets) and the
// Host header's port unless it is the scheme's default.
//
// An edge that serves HTTPS (tlsListen) names https even to a plain HTTP request, with
// the port of its HTTPS listener: the .sources entry a user copies is then the one the
// keyring package ships (armor.toml's https), whichever way the page was reached.
func pageAuthority(ctx *fasthttp.RequestCtx, host, rawHost []byte, tlsListen string) (scheme, authority string) {
	scheme = "http"
	port := hostPort(rawHost)
	if ctx.IsTLS() {
		scheme = "https"
	} else if tlsListen != "" {
		scheme = "https"
		if _, p, err := net.SplitHostPort(tlsListen); err == nil {
			port = p
		}
	}
	authority = string(host)
	if strings.IndexByte(authority, ':') >= 0 {
		authority = "[" + authority + "]"
	}
	if port != "" && !(scheme == "http" && port == "80") && !(scheme == "https" && port == "443") {
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
	scheme, authority := pageAuthority(ctx, host, rawHost, e.cfg.TLSListen)
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
	if notModified(req, r, lm, ctx.Time().Unix()) {
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
