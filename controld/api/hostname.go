package api

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
)

// hostProfile maps a hostname to its lowercase A-label form and checks it is a valid
// DNS name (letters, digits, hyphens; label and name lengths).
var hostProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.ValidateLabels(true),
	idna.StrictDomainName(true),
	idna.VerifyDNSLength(true),
	idna.Transitional(false),
)

// NormalizeHostname returns the canonical form of a hostname as armor stores and serves
// it: a port is stripped, a trailing dot removed, letters lowercased, and a Unicode name
// converted to its IDNA A-label ("bücher.example" → "xn--bcher-kva.example"). An IP
// address is accepted and written in its canonical form (IPv6 without brackets).
func NormalizeHostname(s string) (string, error) {
	host := s
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", fmt.Errorf("hostname %q: unclosed [", s)
		}
		rest := host[end+1:]
		if rest != "" && !validPort(strings.TrimPrefix(rest, ":")) {
			return "", fmt.Errorf("hostname %q: bad port %q", s, rest)
		}
		addr, err := netip.ParseAddr(host[1:end])
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return "", fmt.Errorf("hostname %q: %q is not an IPv6 address", s, host[1:end])
		}
		return addr.String(), nil
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		if strings.IndexByte(host[:i], ':') >= 0 {
			return "", fmt.Errorf("hostname %q: an IPv6 address must be written in brackets", s)
		}
		if !validPort(host[i+1:]) {
			return "", fmt.Errorf("hostname %q: bad port %q", s, host[i+1:])
		}
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", fmt.Errorf("hostname %q is empty", s)
	}
	if addr, err := netip.ParseAddr(host); err == nil && addr.Is4() {
		return addr.String(), nil
	}
	ascii, err := hostProfile.ToASCII(host)
	if err != nil {
		return "", fmt.Errorf("hostname %q: %w", s, err)
	}
	if strings.HasSuffix(ascii, ".") || ascii == "" {
		return "", fmt.Errorf("hostname %q: empty label", s)
	}
	return ascii, nil
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

// NormalizeHostnames normalises each hostname and rejects two entries that name the
// same host, naming both as given.
func NormalizeHostnames(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	seen := make(map[string]string, len(in))
	for _, h := range in {
		n, err := NormalizeHostname(h)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[n]; dup {
			return nil, fmt.Errorf("hostnames %q and %q are both %s: list it once", first, h, n)
		}
		seen[n] = h
		out = append(out, n)
	}
	return out, nil
}
