package edged

// CleanPath turns a request path (the part of the request target before any '?' or
// '#') into a tree path as manifests list it: no leading slash, percent-escapes decoded,
// and repeated slashes merged into one, as nginx's merge_slashes does (debmirror asks
// for "//dists/..." of a repository at a hostname's root). dir reports a path that ends
// in a slash, the root ("/", giving "") included: it can name only a directory. It
// reports status 400 for a path that is malformed or tries to leave the tree (a bad
// escape, an encoded '/' or '\', a control byte, a "." or ".." segment); on success the
// status is 0 and the result is "" (the root) or satisfies manifest.ValidPath.
func CleanPath(raw string) (p string, dir bool, status int) {
	b, dir, status := appendCleanPath(nil, []byte(raw))
	return string(b), dir, status
}

// cleanPath is CleanPath for the handler: when raw needs neither percent-decoding nor
// merging of slashes, the result is a sub-slice of raw itself (no copy); otherwise it
// is built in buf by appendCleanPath. It returns exactly what appendCleanPath would
// (FuzzCleanPathFast checks this).
func cleanPath(buf, raw []byte) ([]byte, bool, int) {
	if len(raw) == 0 || raw[0] != '/' {
		return buf[:0], false, 400
	}
	seg := 1 // start of the current segment
	for i := 1; i < len(raw); i++ {
		switch pathClass[raw[i]] {
		case pcSlash:
			if i == seg {
				return appendCleanPath(buf[:0], raw) // an empty segment: merge
			}
			if dotSegment(raw[seg:i]) {
				return buf[:0], false, 400
			}
			seg = i + 1
		case pcPercent:
			return appendCleanPath(buf[:0], raw)
		case pcBad:
			return buf[:0], false, 400
		}
	}
	switch {
	case seg == 1 && len(raw) == 1:
		return raw[1:], true, 0
	case seg == len(raw):
		return raw[1 : len(raw)-1], true, 0
	case dotSegment(raw[seg:]):
		return buf[:0], false, 400
	}
	return raw[1:], false, 0
}

// Byte classes of a raw request path for cleanPath.
const (
	pcOK = iota
	pcSlash
	pcPercent
	pcBad // a control byte, DEL or a backslash: 400
)

var pathClass = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = pcBad
	}
	t[0x7f] = pcBad
	t['\\'] = pcBad
	t['/'] = pcSlash
	t['%'] = pcPercent
	return t
}()

// appendCleanPath is CleanPath appending to dst; it allocates only if dst is too small.
func appendCleanPath(dst, raw []byte) ([]byte, bool, int) {
	if len(raw) == 0 || raw[0] != '/' {
		return dst, false, 400
	}
	start := len(dst)
	seg := start
	for i := 1; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return dst[:start], false, 400
			}
			c = unhex(raw[i+1])<<4 | unhex(raw[i+2])
			i += 2
			if c == '/' {
				return dst[:start], false, 400
			}
		} else if c == '/' {
			if len(dst) == seg {
				continue // an empty segment: merged
			}
			if dotSegment(dst[seg:]) {
				return dst[:start], false, 400
			}
			dst = append(dst, '/')
			seg = len(dst)
			continue
		}
		if c < 0x20 || c == 0x7f || c == '\\' {
			return dst[:start], false, 400
		}
		dst = append(dst, c)
	}
	if len(dst) == seg { // the root, or a trailing slash
		if seg > start {
			dst = dst[:seg-1]
		}
		return dst, true, 0
	}
	if dotSegment(dst[seg:]) {
		return dst[:start], false, 400
	}
	return dst, false, 0
}

// dotSegment reports a "." or ".." segment, which would leave the tree or alias a path.
func dotSegment(seg []byte) bool {
	return len(seg) <= 2 && len(seg) > 0 && seg[0] == '.' && (len(seg) == 1 || seg[1] == '.')
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
