package edged

// CleanPath turns a request path (the part of the request target before any '?' or
// '#') into a tree path as manifests list it: no leading slash, percent-escapes decoded.
// It reports status 400 for a path that is malformed or tries to leave the tree (a bad
// escape, an encoded '/' or '\', a control byte, a "." or ".." segment), and 404 for one
// that cannot name a file (the root, an empty segment, a trailing slash). On success the
// status is 0 and the result satisfies manifest.ValidPath.
func CleanPath(raw string) (string, int) {
	b, status := appendCleanPath(nil, []byte(raw))
	return string(b), status
}

// cleanPath is CleanPath for the handler: when raw needs no percent-decoding the result
// is raw[1:] itself (no copy); otherwise it is decoded into buf by appendCleanPath. It
// returns exactly what appendCleanPath would (FuzzCleanPathFast checks this).
func cleanPath(buf, raw []byte) ([]byte, int) {
	if len(raw) == 0 || raw[0] != '/' {
		return buf[:0], 400
	}
	seg := 1 // start of the current segment
	notFound := false
	for i := 1; i < len(raw); i++ {
		switch pathClass[raw[i]] {
		case pcSlash:
			switch checkSegment(raw[seg:i]) {
			case 400:
				return buf[:0], 400
			case 404:
				notFound = true
			}
			seg = i + 1
		case pcPercent:
			return appendCleanPath(buf[:0], raw)
		case pcBad:
			return buf[:0], 400
		}
	}
	switch checkSegment(raw[seg:]) {
	case 400:
		return buf[:0], 400
	case 404:
		notFound = true
	}
	if notFound {
		return buf[:0], 404
	}
	return raw[1:], 0
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
func appendCleanPath(dst, raw []byte) ([]byte, int) {
	if len(raw) == 0 || raw[0] != '/' {
		return dst, 400
	}
	start := len(dst)
	segStart := start
	notFound := false
	for i := 1; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return dst[:start], 400
			}
			c = unhex(raw[i+1])<<4 | unhex(raw[i+2])
			i += 2
			if c == '/' {
				return dst[:start], 400
			}
		} else if c == '/' {
			if status := checkSegment(dst[segStart:]); status == 400 {
				return dst[:start], 400
			} else if status == 404 {
				notFound = true
			}
			dst = append(dst, '/')
			segStart = len(dst)
			continue
		}
		if c < 0x20 || c == 0x7f || c == '\\' {
			return dst[:start], 400
		}
		dst = append(dst, c)
	}
	switch checkSegment(dst[segStart:]) {
	case 400:
		return dst[:start], 400
	case 404:
		notFound = true
	}
	if notFound {
		return dst[:start], 404
	}
	return dst, 0
}

// checkSegment classifies one decoded path segment: 400 for "." and "..", 404 for an
// empty one, 0 otherwise.
func checkSegment(seg []byte) int {
	switch string(seg) {
	case ".", "..":
		return 400
	case "":
		return 404
	}
	return 0
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
