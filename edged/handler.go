package edged

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// retryAfter is the Retry-After (seconds) sent with 503 answers.
const retryAfter = "5"

// httpError is a failed request: its status, a short plain-text body, and whether to
// send Retry-After. One function (fail) writes every error response.
type httpError struct {
	status int
	body   []byte
	retry  bool
}

var (
	errBadRequest     = &httpError{status: 400, body: []byte("bad request\n")}
	errMissingHost    = &httpError{status: 400, body: []byte("missing Host header\n")}
	errTimeout        = &httpError{status: 408, body: []byte("request timeout\n")}
	errHeaderTooLarge = &httpError{status: 431, body: []byte("request header too large\n")}
	errNotFound       = &httpError{status: 404, body: []byte("not found\n")}
	errMethod         = &httpError{status: 405, body: []byte("method not allowed\n")}
	errNoRoutes       = &httpError{status: 503, body: []byte("no routes loaded yet\n"), retry: true}
	errStoreDown      = &httpError{status: 503, body: []byte("object store unavailable\n"), retry: true}
	errStoreBad       = &httpError{status: 502, body: []byte("object damaged in the store\n")}
)

var (
	hETag          = []byte("ETag")
	hLastModified  = []byte("Last-Modified")
	hCacheControl  = []byte("Cache-Control")
	hAcceptRanges  = []byte("Accept-Ranges")
	hContentRange  = []byte("Content-Range")
	hRetryAfter    = []byte("Retry-After")
	hAllow         = []byte("Allow")
	vBytes         = []byte("bytes")
	vNoStore       = []byte("no-store")
	vAllow         = []byte("GET, HEAD")
	vRetryAfter    = []byte(retryAfter)
	ctErrorText    = []byte("text/plain; charset=utf-8")
	prefixHTTP     = []byte("http://")
	prefixHTTPS    = []byte("https://")
	prefixBytesEq  = []byte("bytes=")
	prefixWeakETag = []byte("W/")

	// Request header names in fasthttp's canonical form, for PeekCanonical: Peek would
	// copy and normalise the name on every call, and a canonical name normalises to
	// itself, so the lookups are the same.
	hIfNoneMatch     = []byte(fasthttp.HeaderIfNoneMatch)
	hIfModifiedSince = []byte(fasthttp.HeaderIfModifiedSince)
	hRange           = []byte(fasthttp.HeaderRange)
	hIfRange         = []byte(fasthttp.HeaderIfRange)
)

// handle is the fasthttp handler of the public listener.
func (e *Edge) handle(ctx *fasthttp.RequestCtx) {
	var start time.Time
	if e.access != nil {
		start = time.Now()
	}
	status, n, herr := e.serve(ctx)
	if herr != nil {
		status, n = fail(ctx, herr), 0
	}
	e.m.request(ctx.Method(), status)
	if n > 0 {
		e.m.bytes.Add(float64(n))
	}
	if e.access != nil {
		e.logAccess(ctx, status, n, time.Since(start))
	}
}

// fail writes an error response and returns its status.
func fail(ctx *fasthttp.RequestCtx, he *httpError) int {
	ctx.SetStatusCode(he.status)
	h := &ctx.Response.Header
	h.SetContentTypeBytes(ctErrorText)
	h.SetCanonical(hCacheControl, vNoStore)
	switch {
	case he.retry:
		h.SetCanonical(hRetryAfter, vRetryAfter)
	case he == errMethod:
		h.SetCanonical(hAllow, vAllow)
	}
	ctx.Response.SetBodyRaw(he.body)
	return he.status
}

// serve answers one request: it returns the status and body length written, or an
// error for fail to write.
func (e *Edge) serve(ctx *fasthttp.RequestCtx) (int, int64, *httpError) {
	req := &ctx.Request.Header
	head := req.IsHead()
	if !head && !req.IsGet() {
		return 0, 0, errMethod
	}
	host, target, herr := requestTarget(req)
	if herr != nil {
		return 0, 0, herr
	}
	var hostBuf [256]byte
	h, err := appendHost(hostBuf[:0], host)
	if err != nil {
		return 0, 0, errBadRequest
	}
	t := e.table.Load()
	if t == nil {
		return 0, 0, errNoRoutes
	}
	s := t.hosts[string(h)]
	if s == nil {
		return 0, 0, errNotFound
	}
	var pathBuf [512]byte
	p, dir, status := cleanPath(pathBuf[:0], target)
	if status != 0 {
		return 0, 0, errBadRequest
	}
	var r *route
	if !dir {
		if r = s.routes.paths[string(p)]; r == nil {
			r = s.extra[string(p)]
		}
	}
	if r == nil || (r.until != 0 && ctx.Time().UnixNano() >= r.until) {
		if d := s.routes.dirs[string(p)]; d != nil && r == nil {
			if len(p) == 0 && dir && !bytes.Contains(req.PeekCanonical(hAccept), mimeJSON) {
				return e.servePage(ctx, s, h, host)
			}
			status, n := serveDir(ctx, s, p, d, dir)
			return status, n, nil
		}
		return 0, 0, errNotFound
	}
	resp := &ctx.Response.Header
	lm := r.lastModifiedAt(ctx.Time().Unix())
	if notModified(req, r, lm, ctx.Time().Unix()) {
		setValidators(resp, r, lm)
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return fasthttp.StatusNotModified, 0, nil
	}
	start, end, partial, ok := byteRange(req, r, lm)
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusRequestedRangeNotSatisfiable)
		resp.SetCanonical(hContentRange, []byte("bytes */"+strconv.FormatInt(r.size, 10)))
		resp.SetCanonical(hAcceptRanges, vBytes)
		return fasthttp.StatusRequestedRangeNotSatisfiable, 0, nil
	}
	length := end - start
	switch {
	case head:
		if r.body == nil && (r.size > e.threshold && !e.disk.has(r.sum, r.size) || r.size <= e.threshold && !e.objects.has(r.key)) {
			if err := e.objects.check(r.sum, r.size); err != nil {
				return 0, 0, e.storeError(err)
			}
		}
		resp.SetContentLength(int(length))
	case r.body != nil:
		ctx.Response.SetBodyRaw(r.body[start:end])
	case r.size > e.threshold:
		f, err := e.disk.open(r.sum, r.size)
		if err != nil {
			return 0, 0, e.storeError(err)
		}
		ctx.Response.SetBodyStream(&sectionBody{SectionReader: io.NewSectionReader(f, start, length), f: f}, int(length))
	default:
		b, err := e.objects.get(r.key, r.sum, r.size)
		if err != nil {
			return 0, 0, e.storeError(err)
		}
		ctx.Response.SetBodyRaw(b[start:end])
	}
	status = fasthttp.StatusOK
	if partial {
		status = fasthttp.StatusPartialContent
		resp.SetContentRange(int(start), int(end-1), int(r.size))
	}
	ctx.SetStatusCode(status)
	setValidators(resp, r, lm)
	resp.SetContentTypeBytes(r.contentType)
	resp.SetCanonical(hAcceptRanges, vBytes)
	if head {
		return status, 0, nil
	}
	return status, length, nil
}

// setValidators sets the headers a 200, 206 and 304 share; Last-Modified only when lm.
func setValidators(h *fasthttp.ResponseHeader, r *route, lm bool) {
	h.SetCanonical(hETag, r.etag)
	if lm {
		h.SetCanonical(hLastModified, r.lastModified)
	}
	h.SetCanonical(hCacheControl, r.cacheControl)
}

// storeError maps a store failure to a response. A damaged object is the store's fault
// (502). Anything else, a missing object included, means the store cannot serve it now
// (503, retry): every object a route names was in the store when controld recorded the
// release, so its absence is an outage (an unmounted volume, a lagging replica), not a
// permanent answer.
func (e *Edge) storeError(err error) *httpError {
	e.logger.Warn("object fetch failed", "err", err)
	if errors.Is(err, errCorrupt) {
		return errStoreBad
	}
	return errStoreDown
}

// requestTarget returns the host and path of a request: from the Host header and the
// path of an origin-form target, or from an absolute-form target ("GET
// http://host/path", as sent through a proxy), whose host wins over the header's.
func requestTarget(h *fasthttp.RequestHeader) (host, target []byte, herr *httpError) {
	uri := h.RequestURI()
	switch {
	case len(uri) > 0 && uri[0] == '/':
		host, target = h.Host(), uri
	case hasPrefixFold(uri, prefixHTTP) || hasPrefixFold(uri, prefixHTTPS):
		rest := uri[bytes.Index(uri, []byte("//"))+2:]
		i := bytes.IndexAny(rest, "/?#")
		if i < 0 {
			i = len(rest)
		}
		host, target = rest[:i], rest[i:]
		if bytes.IndexByte(host, '@') >= 0 {
			return nil, nil, errBadRequest
		}
		if len(target) == 0 || target[0] != '/' {
			target = []byte("/")
		}
	default:
		return nil, nil, errBadRequest
	}
	for i, c := range target {
		if c == '?' || c == '#' {
			target = target[:i]
			break
		}
	}
	if len(host) == 0 {
		return nil, nil, errMissingHost
	}
	return host, target, nil
}

func hasPrefixFold(b, prefix []byte) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], prefix)
}

// notModified evaluates If-None-Match (weak comparison) or, when absent,
// If-Modified-Since against the route (only when its Last-Modified is usable, lm). A
// date later than now (unix seconds) is invalid and ignored, as RFC 9110 13.1.3 allows
// and Apache does: a client's clock ahead of ours must not freeze its copy.
func notModified(h *fasthttp.RequestHeader, r *route, lm bool, now int64) bool {
	if inm := h.PeekCanonical(hIfNoneMatch); len(inm) > 0 {
		return etagListMatch(inm, r.etag)
	}
	if ims := h.PeekCanonical(hIfModifiedSince); len(ims) > 0 && lm {
		t, err := fasthttp.ParseHTTPDate(ims)
		return err == nil && r.modTime <= t.Unix() && t.Unix() <= now
	}
	return false
}

// etagListMatch reports whether a list of entity tags ("*" or "a", W/"b") matches etag
// under weak comparison.
func etagListMatch(list, etag []byte) bool {
	for len(list) > 0 {
		var tag []byte
		if i := bytes.IndexByte(list, ','); i >= 0 {
			tag, list = list[:i], list[i+1:]
		} else {
			tag, list = list, nil
		}
		tag = bytes.TrimSpace(tag)
		if len(tag) == 1 && tag[0] == '*' {
			return true
		}
		tag = bytes.TrimPrefix(tag, prefixWeakETag)
		if bytes.Equal(tag, etag) {
			return true
		}
	}
	return false
}

// byteRange applies a Range header to the route's object: [start, end) of the bytes to
// send and whether that is a partial answer. ok is false for an unsatisfiable range
// (416). A malformed or multi-range header, or an If-Range that does not match, gives
// the whole object.
func byteRange(h *fasthttp.RequestHeader, r *route, lm bool) (start, end int64, partial, ok bool) {
	size := r.size
	rh := h.PeekCanonical(hRange)
	if len(rh) == 0 || !hasPrefixFold(rh, prefixBytesEq) || bytes.IndexByte(rh, ',') >= 0 {
		return 0, size, false, true
	}
	if ir := h.PeekCanonical(hIfRange); len(ir) > 0 && !ifRangeMatches(ir, r, lm) {
		return 0, size, false, true
	}
	spec := bytes.TrimSpace(rh[len(prefixBytesEq):])
	dash := bytes.IndexByte(spec, '-')
	if dash < 0 {
		return 0, size, false, true
	}
	first, last := bytes.TrimSpace(spec[:dash]), bytes.TrimSpace(spec[dash+1:])
	if len(first) == 0 {
		n, valid := parseDigits(last)
		if !valid {
			return 0, size, false, true
		}
		if n == 0 || size == 0 {
			return 0, 0, false, false
		}
		return max(size-n, 0), size, true, true
	}
	a, valid := parseDigits(first)
	if !valid {
		return 0, size, false, true
	}
	b := size - 1
	if len(last) > 0 {
		v, valid := parseDigits(last)
		if !valid || v < a {
			return 0, size, false, true
		}
		b = min(v, size-1)
	}
	if a >= size {
		return 0, 0, false, false
	}
	return a, b + 1, true, true
}

// ifRangeMatches evaluates If-Range: a strong entity-tag match, or a date equal to the
// route's usable Last-Modified.
func ifRangeMatches(ir []byte, r *route, lm bool) bool {
	if ir[0] == '"' {
		return bytes.Equal(ir, r.etag)
	}
	if bytes.HasPrefix(ir, prefixWeakETag) || !lm {
		return false
	}
	t, err := fasthttp.ParseHTTPDate(ir)
	return err == nil && t.Unix() == r.modTime
}

// parseDigits parses a non-negative decimal up to 18 digits.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// logAccess writes one access-log record.
func (e *Edge) logAccess(ctx *fasthttp.RequestCtx, status int, n int64, d time.Duration) {
	e.access.LogAttrs(e.base, slog.LevelInfo, "request",
		slog.String("remote", ctx.RemoteIP().String()),
		slog.String("method", string(ctx.Method())),
		slog.String("host", string(ctx.Request.Header.Host())),
		slog.String("uri", string(ctx.Request.Header.RequestURI())),
		slog.Int("status", status),
		slog.Int64("bytes", n),
		slog.Float64("seconds", d.Seconds()),
		slog.String("user_agent", string(ctx.Request.Header.UserAgent())),
	)
}
