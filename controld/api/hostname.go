package api

import (
	"fmt"

	"github.com/armor-apt/armor/internal/hostname"
)

// NormalizeHostnames normalises each hostname with hostname.Normalize (the one place
// armor does it: lowercase, IDNA A-label, no port, no trailing dot) and rejects two
// entries that name the same host, naming both as given.
func NormalizeHostnames(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	seen := make(map[string]string, len(in))
	for _, h := range in {
		n, err := hostname.Normalize(h)
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
