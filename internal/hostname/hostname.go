// Package hostname normalises the hostnames a repository is served under. It is the one
// place where armor decides that "APT.Example.TEST.:8080" and "apt.example.test" are the
// same site, so armor.toml, controld and edged always agree.
package hostname

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"golang.org/x/net/idna"
)

// ErrInvalid wraps every rejection.
var ErrInvalid = errors.New("invalid hostname")

var profile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.StrictDomainName(true),
	idna.Transitional(false),
)

// Normalize returns the canonical form of a hostname or of a Host header: lowercase,
// IDNA A-labels, no port, no trailing dot. IP literals are accepted as they are (an IPv6
// literal without its brackets).
func Normalize(host string) (string, error) {
	h := strings.TrimSpace(host)
	if h == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalid)
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), nil
	}
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", fmt.Errorf("%w: %q: unclosed [", ErrInvalid, host)
		}
		ip := net.ParseIP(h[1:end])
		if ip == nil || ip.To4() != nil || (end+1 < len(h) && h[end+1] != ':') {
			return "", fmt.Errorf("%w: %q", ErrInvalid, host)
		}
		return ip.String(), nil
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		port := h[i+1:]
		for _, c := range port {
			if c < '0' || c > '9' {
				return "", fmt.Errorf("%w: %q: bad port", ErrInvalid, host)
			}
		}
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	if ip := net.ParseIP(h); ip != nil && ip.To4() != nil {
		return ip.String(), nil
	}
	a, err := profile.ToASCII(h)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalid, host, err)
	}
	a = strings.ToLower(a)
	if again, err := profile.ToASCII(a); err != nil || again != a {
		return "", fmt.Errorf("%w: %q", ErrInvalid, host)
	}
	if a == "" || len(a) > 253 || strings.HasPrefix(a, ".") || strings.HasSuffix(a, ".") || strings.Contains(a, "..") {
		return "", fmt.Errorf("%w: %q", ErrInvalid, host)
	}
	return a, nil
}
