package pkcs11

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// URI is the part of an RFC 7512 PKCS#11 URI that selects a token, a key and a PIN.
type URI struct {
	Token, Serial string // token label, token serial number
	Slot          *int   // slot-id
	Object        string // the key's label (CKA_LABEL)
	ID            []byte // the key's CKA_ID
	ModulePath    string
	PIN           string // pin-value, or what pin-source holds
	HasPIN        bool
}

// pathAttrs are the path attributes of RFC 7512 (section 2.3) and queryAttrs its query
// attributes; others are refused, since a misspelt attribute would select nothing.
var (
	pathAttrs = map[string]bool{"token": true, "manufacturer": true, "serial": true, "model": true,
		"library-manufacturer": true, "library-description": true, "library-version": true,
		"object": true, "type": true, "id": true, "slot-id": true, "slot-description": true, "slot-manufacturer": true}
	queryAttrs = map[string]bool{"module-path": true, "module-name": true, "pin-value": true, "pin-source": true}
)

// ParseURI parses a pkcs11: URI and reads the file that pin-source names.
func ParseURI(s string) (*URI, error) {
	rest, ok := strings.CutPrefix(s, "pkcs11:")
	if !ok {
		return nil, fmt.Errorf("%q is not a pkcs11: URI", redact(s))
	}
	path, query, _ := strings.Cut(rest, "?")
	u := &URI{}
	attrs := map[string]string{}
	for _, ps := range [][2]string{{path, ";"}, {query, "&"}} {
		part, sep := ps[0], ps[1]
		if part == "" {
			continue
		}
		for _, kv := range strings.Split(part, sep) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("pkcs11 URI %q: %q is not attribute=value", redact(s), kv)
			}
			known := pathAttrs
			if sep == "&" {
				known = queryAttrs
			}
			if !known[k] {
				return nil, fmt.Errorf("pkcs11 URI %q: unknown attribute %q", redact(s), k)
			}
			if _, dup := attrs[k]; dup {
				return nil, fmt.Errorf("pkcs11 URI %q: %s given twice", redact(s), k)
			}
			dec, err := url.PathUnescape(v)
			if err != nil {
				return nil, fmt.Errorf("pkcs11 URI %q: %s: %w", redact(s), k, err)
			}
			attrs[k] = dec
		}
	}
	u.Token, u.Serial, u.Object, u.ModulePath = attrs["token"], attrs["serial"], attrs["object"], attrs["module-path"]
	if id, ok := attrs["id"]; ok {
		u.ID = []byte(id)
	}
	if v, ok := attrs["slot-id"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("pkcs11 URI %q: slot-id %q is not a number", redact(s), v)
		}
		u.Slot = &n
	}
	if t, ok := attrs["type"]; ok && t != "private" {
		return nil, fmt.Errorf("pkcs11 URI %q: type=%s: the key that signs is type=private", redact(s), t)
	}
	if u.ModulePath == "" {
		return nil, fmt.Errorf("pkcs11 URI %q has no module-path: add ?module-path=/path/to/module.so (for SoftHSM2: /usr/lib/softhsm/libsofthsm2.so)", redact(s))
	}
	if u.Token == "" && u.Serial == "" && u.Slot == nil {
		return nil, fmt.Errorf("pkcs11 URI %q selects no token: add token=LABEL, serial=SERIAL or slot-id=N", redact(s))
	}
	if u.Object == "" && u.ID == nil {
		return nil, fmt.Errorf("pkcs11 URI %q selects no key: add object=LABEL or id=ID", redact(s))
	}
	pv, hasValue := attrs["pin-value"]
	ps, hasSource := attrs["pin-source"]
	switch {
	case hasValue && hasSource:
		return nil, fmt.Errorf("pkcs11 URI %q: give pin-value or pin-source, not both", redact(s))
	case hasValue:
		u.PIN, u.HasPIN = pv, true
	case hasSource:
		p := strings.TrimPrefix(ps, "file://")
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("pkcs11 URI %q: read pin-source: %w", redact(s), err)
		}
		u.PIN, u.HasPIN = strings.TrimRight(string(data), "\r\n"), true
	}
	return u, nil
}

// redact hides a pin-value, so that a URI can go into an error message or a log.
func redact(s string) string {
	i := strings.Index(s, "pin-value=")
	if i < 0 {
		return s
	}
	j := strings.IndexByte(s[i:], '&')
	if j < 0 {
		return s[:i] + "pin-value=REDACTED"
	}
	return s[:i] + "pin-value=REDACTED" + s[i+j:]
}

// Redact hides the PIN a key URI may carry (pin-value), for messages.
func Redact(s string) string { return redact(s) }
