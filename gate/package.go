package gate

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/armor-apt/armor/debian/relation"
	"pault.ag/go/debian/version"
)

// MultiArch is a package's Multi-Arch field.
type MultiArch uint8

// The values of Multi-Arch; No is the field's absence.
const (
	MANo MultiArch = iota
	MASame
	MAForeign
	MAAllowed
)

// Package is a binary package as the check sees it: its identity and its relations.
type Package struct {
	Name, Version, Architecture string
	MultiArch                   MultiArch
	Essential                   bool
	PreDepends, Depends         [][]relation.Relation
	Conflicts, Breaks, Provides []relation.Relation
	// From says where the package is listed, for reports ("stable/main", or a base).
	From string
	// SHA256 is the .deb's digest, when the stanza names it.
	SHA256 string

	ver    version.Version
	verSet bool // ver holds Version parsed
	// lazy holds Pre-Depends and Depends as read from a cache, parsed on first use.
	lazy *[2]string
	// text holds the relation fields as read (Pre-Depends, Depends, Conflicts, Breaks,
	// Provides), for a snapshot to keep them as they came.
	text *[5]string
}

// depFields returns Pre-Depends and Depends, parsing them if they were left as text; text
// that no longer parses (a cache's, written by another version) gives none.
func (p *Package) depFields() [2][][]relation.Relation {
	if p.lazy != nil {
		p.PreDepends, _ = relation.ParseDepends(p.lazy[0])
		p.Depends, _ = relation.ParseDepends(p.lazy[1])
		p.lazy = nil
	}
	return [2][][]relation.Relation{p.PreDepends, p.Depends}
}

// ID renders the package's identity as dose-distcheck and apt print it.
func (p *Package) ID() string { return p.Name + " " + p.Version + " (" + p.Architecture + ")" }

// relationFields are the fields ParseStanza reads, beside Package, Version and Architecture.
var relationFields = []string{"Pre-Depends", "Depends", "Conflicts", "Breaks", "Provides"}

// ParseStanza reads a package from one stanza of a Packages index (or a .deb's control
// paragraph). Only the fields the check needs are read; the others are skipped unparsed.
func ParseStanza(st []byte) (Package, error) {
	var p Package
	var err error
	var text [5]string
	for rest := st; len(rest) > 0; {
		var line []byte
		line, rest = nextField(rest)
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch string(name) {
		case "Package":
			p.Name = fieldValue(value)
		case "Version":
			p.Version = fieldValue(value)
		case "Architecture":
			p.Architecture = fieldValue(value)
		case "Multi-Arch":
			p.MultiArch, err = parseMultiArch(fieldValue(value))
		case "Essential":
			p.Essential = strings.EqualFold(fieldValue(value), "yes")
		case "SHA256":
			p.SHA256 = fieldValue(value)
		case "Pre-Depends":
			text[0] = fieldValue(value)
			p.PreDepends, err = relation.ParseDepends(text[0])
		case "Depends":
			text[1] = fieldValue(value)
			p.Depends, err = relation.ParseDepends(text[1])
		case "Conflicts":
			text[2] = fieldValue(value)
			p.Conflicts, err = relation.ParseList(text[2])
		case "Breaks":
			text[3] = fieldValue(value)
			p.Breaks, err = relation.ParseList(text[3])
		case "Provides":
			text[4] = fieldValue(value)
			p.Provides, err = parseProvides(text[4])
		}
		if err != nil {
			return p, fmt.Errorf("package %s: %s: %w", p.Name, name, err)
		}
	}
	if p.Name == "" || p.Version == "" || p.Architecture == "" {
		return p, fmt.Errorf("stanza of package %q lacks Package, Version or Architecture", p.Name)
	}
	p.verSet = true
	if p.ver, err = version.Parse(p.Version); err != nil {
		return p, fmt.Errorf("package %s: version %q: %w", p.Name, p.Version, err)
	}
	p.text = &text
	return p, nil
}

// nextField returns the first field of st (with its continuation lines) and the rest.
func nextField(st []byte) (field, rest []byte) {
	end := 0
	for {
		i := bytes.IndexByte(st[end:], '\n')
		if i < 0 {
			return st, nil
		}
		end += i + 1
		if end == len(st) || (st[end] != ' ' && st[end] != '\t') {
			return st[:end-1], st[end:]
		}
	}
}

// fieldValue trims a field's value; continuation lines stay, as the relation parser
// reads line breaks as blanks.
func fieldValue(v []byte) string { return string(bytes.TrimSpace(v)) }

func parseMultiArch(s string) (MultiArch, error) {
	switch s {
	case "", "no":
		return MANo, nil
	case "same":
		return MASame, nil
	case "foreign":
		return MAForeign, nil
	case "allowed":
		return MAAllowed, nil
	}
	return MANo, fmt.Errorf("unknown value %q", s)
}

// parseProvides reads Provides: names with at most an "=" version, no qualifier.
func parseProvides(s string) ([]relation.Relation, error) {
	rs, err := relation.ParseList(s)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if r.Op != relation.Any && r.Op != relation.Equal {
			return nil, fmt.Errorf("%w: %s: a provided version must be exact (=)", relation.ErrSyntax, r)
		}
		if r.Arch != "" {
			return nil, fmt.Errorf("%w: %s: a provided name takes no architecture", relation.ErrSyntax, r)
		}
	}
	return rs, nil
}

// ReadPackages reads every stanza of a Packages index. from is set as each package's From.
func ReadPackages(data []byte, from string) ([]Package, error) {
	var out []Package
	line := 1
	for len(data) > 0 {
		// Skip blank lines between stanzas.
		for len(data) > 0 && (data[0] == '\n' || data[0] == '\r') {
			data = data[1:]
			line++
		}
		if len(data) == 0 {
			break
		}
		end := bytes.Index(data, []byte("\n\n"))
		st := data
		if end >= 0 {
			st, data = data[:end+1], data[end+2:]
		} else {
			data = nil
		}
		p, err := ParseStanza(st)
		if err != nil {
			return nil, fmt.Errorf("%s, stanza at line %d: %w", from, line, err)
		}
		p.From = from
		out = append(out, p)
		line += bytes.Count(st, []byte("\n")) + 1
	}
	return out, nil
}

// parsedVersion returns Version parsed (once); a version that does not parse compares
// as the empty version.
func (p *Package) parsedVersion() version.Version {
	if !p.verSet {
		p.ver, _ = version.Parse(p.Version)
		p.verSet = true
	}
	return p.ver
}
