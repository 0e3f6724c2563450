package edged

import (
	"github.com/armor-apt/armor/internal/hostname"
)

// appendHost appends the normalised form of a Host header to dst, exactly as
// hostname.Normalize (the one normaliser armor, controld and edged share) would give
// it. Plain ASCII names, the only kind apt sends, take an allocation-free path: labels
// of letters, digits and inner single hyphens, an optional trailing dot, an optional
// numeric port. Anything else goes through hostname.Normalize.
func appendHost(dst, h []byte) ([]byte, error) {
	if out, ok := appendSimpleHost(dst, h); ok {
		return out, nil
	}
	n, err := hostname.Normalize(string(h))
	if err != nil {
		return dst, err
	}
	return append(dst, n...), nil
}

// appendSimpleHost handles the common case; ok is false when h is not a simple name
// (then dst is returned unchanged and the caller takes the general path).
func appendSimpleHost(dst, h []byte) ([]byte, bool) {
	end := len(h)
	for i := len(h) - 1; i >= 0; i-- {
		c := h[i]
		if c == ':' {
			end = i
			break
		}
		if c < '0' || c > '9' {
			break
		}
	}
	h = h[:end]
	if len(h) > 0 && h[len(h)-1] == '.' {
		h = h[:len(h)-1]
	}
	if len(h) == 0 || len(h) > 253 {
		return dst, false
	}
	start := len(dst)
	label := 0
	for i, c := range h {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == '-':
			// Not first or last in a label, and no "--" (IDNA gives those meaning).
			if label == 0 || i+1 == len(h) || h[i+1] == '.' || h[i+1] == '-' {
				return dst[:start], false
			}
		case c == '.':
			if label == 0 {
				return dst[:start], false
			}
			label = 0
			dst = append(dst, c)
			continue
		default:
			return dst[:start], false
		}
		if label++; label > 63 {
			return dst[:start], false
		}
		dst = append(dst, c)
	}
	if label == 0 {
		return dst[:start], false
	}
	return dst, true
}
