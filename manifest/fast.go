package manifest

import (
	"strconv"
	"strings"
)

// The manifest of a large repository holds a table per package: 100,000 packages make
// 25 MB of TOML, which go-toml encodes in about a second and decodes in two. An
// incremental build must stay well under that, so the canonical form is also written and
// read by the two functions below. go-toml remains the authority: appendCanonical
// produces exactly the bytes go-toml's encoder produces (a test compares them), and
// parseCanonical accepts only the plain subset those bytes use (bare keys, literal
// strings, decimal integers, [[package]] and [[file]] tables); anything else, including
// every malformed or hand-edited input, goes to go-toml's strict decoder, which gives the
// precise error with its line. A fuzz test checks that whatever parseCanonical accepts,
// go-toml decodes to the same manifest.

// plainString reports whether go-toml writes s as a literal string 's' that
// parseCanonical reads back: printable ASCII without quotes or backslashes.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

// plainByte is plainString's test per byte, as a table: manifests of large repositories
// hold tens of megabytes of strings, and this runs over all of them on every encoding.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '\'' && c != '"' && c != '\\'
	}
	return t
}()

func (m *Manifest) plain() bool {
	for _, s := range []string{m.Repository, m.ID, m.Parent, m.Date} {
		if !plainString(s) {
			return false
		}
	}
	for _, p := range m.Packages {
		for _, s := range []string{p.Suite, p.Component, p.Name, p.Version, p.Architecture, p.Path, p.SHA256} {
			if !plainString(s) {
				return false
			}
		}
	}
	for _, f := range m.Files {
		if !plainString(f.Path) || !plainString(f.SHA256) {
			return false
		}
	}
	return true
}

// appendCanonical appends m in go-toml's layout. m must be plain.
func appendCanonical(b []byte, m *Manifest) []byte {
	str := func(key, v string) {
		b = append(b, key...)
		b = append(b, " = '"...)
		b = append(b, v...)
		b = append(b, "'\n"...)
	}
	num := func(key string, v int64) {
		b = append(b, key...)
		b = append(b, " = "...)
		b = strconv.AppendInt(b, v, 10)
		b = append(b, '\n')
	}
	num("schema", int64(m.Schema))
	str("repository", m.Repository)
	str("id", m.ID)
	str("parent", m.Parent)
	str("date", m.Date)
	for _, p := range m.Packages {
		b = append(b, "\n[[package]]\n"...)
		str("suite", p.Suite)
		str("component", p.Component)
		str("name", p.Name)
		str("version", p.Version)
		str("architecture", p.Architecture)
		str("path", p.Path)
		num("size", p.Size)
		str("sha256", p.SHA256)
	}
	for _, f := range m.Files {
		b = append(b, "\n[[file]]\n"...)
		str("path", f.Path)
		num("size", f.Size)
		str("sha256", f.SHA256)
	}
	return b
}

// parseCanonical decodes the canonical subset; ok is false for anything else.
func parseCanonical(data []byte) (m *Manifest, ok bool) {
	m = &Manifest{}
	// One copy of the input backs every decoded string: no allocation per field.
	all := string(data)
	pos := 0
	const (
		top = iota
		pkg
		file
	)
	section := top
	var seen uint16 // keys set in the current table, by bit
	for pos < len(all) {
		end := strings.IndexByte(all[pos:], '\n')
		if end < 0 {
			end = len(all) - pos
		}
		line := all[pos : pos+end]
		pos += end + 1
		switch {
		case len(line) == 0:
			continue
		case line[0] == '#':
			if section != top || seen != 0 || !plainString(line) {
				return nil, false
			}
			continue
		case line == "[[package]]":
			if section == file {
				return nil, false // go-toml would accept it; keep the fast path simple
			}
			section = pkg
			m.Packages = append(m.Packages, Package{})
			seen = 0
			continue
		case line == "[[file]]":
			section = file
			m.Files = append(m.Files, File{})
			seen = 0
			continue
		}
		eq := strings.Index(line, " = ")
		if eq <= 0 {
			return nil, false
		}
		key, raw := line[:eq], line[eq+3:]
		bit := keyBit(key)
		if bit == 0 || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		var s string
		var n int64
		isStr := len(raw) >= 2 && raw[0] == '\'' && raw[len(raw)-1] == '\''
		if isStr {
			s = raw[1 : len(raw)-1]
			if !plainString(s) {
				return nil, false
			}
		} else {
			if len(raw) == 0 || len(raw) > 18 || (raw[0] == '0' && len(raw) > 1) {
				return nil, false
			}
			for i := 0; i < len(raw); i++ {
				if raw[i] < '0' || raw[i] > '9' {
					return nil, false
				}
			}
			n, _ = strconv.ParseInt(raw, 10, 64)
		}
		if !setField(m, section, key, s, n, isStr) {
			return nil, false
		}
	}
	return m, true
}

var keyBits = map[string]uint16{
	"schema": 1 << 0, "repository": 1 << 1, "id": 1 << 2, "parent": 1 << 3, "date": 1 << 4,
	"suite": 1 << 5, "component": 1 << 6, "name": 1 << 7, "version": 1 << 8,
	"architecture": 1 << 9, "path": 1 << 10, "size": 1 << 11, "sha256": 1 << 12,
}

// keyBit is the bit of a known key, 0 for any other.
func keyBit(key string) uint16 { return keyBits[key] }

func setField(m *Manifest, section int, key, s string, n int64, isStr bool) bool {
	strField := func(dst *string) bool {
		*dst = s
		return isStr
	}
	numField := func(dst *int64) bool {
		*dst = n
		return !isStr
	}
	switch section {
	case 0:
		switch key {
		case "schema":
			if isStr || n > 1<<31 {
				return false
			}
			m.Schema = int(n)
			return true
		case "repository":
			return strField(&m.Repository)
		case "id":
			return strField(&m.ID)
		case "parent":
			return strField(&m.Parent)
		case "date":
			return strField(&m.Date)
		}
	case 1:
		p := &m.Packages[len(m.Packages)-1]
		switch key {
		case "suite":
			return strField(&p.Suite)
		case "component":
			return strField(&p.Component)
		case "name":
			return strField(&p.Name)
		case "version":
			return strField(&p.Version)
		case "architecture":
			return strField(&p.Architecture)
		case "path":
			return strField(&p.Path)
		case "size":
			return numField(&p.Size)
		case "sha256":
			return strField(&p.SHA256)
		}
	case 2:
		f := &m.Files[len(m.Files)-1]
		switch key {
		case "path":
			return strField(&f.Path)
		case "size":
			return numField(&f.Size)
		case "sha256":
			return strField(&f.SHA256)
		}
	}
	return false
}
