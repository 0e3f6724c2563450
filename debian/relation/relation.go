package relation

import (
	"errors"
	"fmt"
	"strings"

	"pault.ag/go/debian/version"
)

// Op is a version constraint's operator.
type Op uint8

// The operators of a version constraint; Any means the relation has none.
const (
	Any       Op = iota
	Less         // <<
	LessEq       // <= (and the obsolete <)
	Equal        // =
	GreaterEq    // >= (and the obsolete >)
	Greater      // >>
)

var opText = [...]string{Any: "", Less: "<<", LessEq: "<=", Equal: "=", GreaterEq: ">=", Greater: ">>"}

func (o Op) String() string { return opText[o] }

// Relation is one package named in a relationship field: "name:arch (op version)".
type Relation struct {
	Name string
	// Arch is the architecture qualifier: "" for none, "any", "native", or an
	// architecture's name.
	Arch    string
	Op      Op
	Version string // empty when Op is Any
}

// Satisfies reports whether version v meets the relation's constraint; always true for
// a relation without one. v and the relation's version are valid Debian versions.
func (r *Relation) Satisfies(v version.Version) bool {
	if r.Op == Any {
		return true
	}
	want, err := version.Parse(r.Version)
	if err != nil {
		return false
	}
	return r.Op.Holds(version.Compare(v, want))
}

// Holds reports whether a comparison's result (negative, zero or positive: a version
// against the constraint's) meets the operator.
func (o Op) Holds(cmp int) bool {
	switch o {
	case Less:
		return cmp < 0
	case LessEq:
		return cmp <= 0
	case Equal:
		return cmp == 0
	case GreaterEq:
		return cmp >= 0
	case Greater:
		return cmp > 0
	}
	return true
}

// String renders the relation as dpkg writes it.
func (r Relation) String() string {
	var b strings.Builder
	b.WriteString(r.Name)
	if r.Arch != "" {
		b.WriteByte(':')
		b.WriteString(r.Arch)
	}
	if r.Op != Any {
		b.WriteString(" (")
		b.WriteString(r.Op.String())
		b.WriteByte(' ')
		b.WriteString(r.Version)
		b.WriteByte(')')
	}
	return b.String()
}

// Alternatives renders relations joined by " | ".
func Alternatives(rs []Relation) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, " | ")
}

// ErrSyntax wraps every parse error.
var ErrSyntax = errors.New("bad relationship field")

// ParseDepends reads a field whose relations may have alternatives (Depends,
// Pre-Depends, Recommends): each element of the result is one relation's alternatives.
// An empty field gives none.
func ParseDepends(field string) ([][]Relation, error) {
	p := parser{s: field}
	var out [][]Relation
	for p.more() {
		alts, err := p.alternatives()
		if err != nil {
			return nil, err
		}
		if alts != nil {
			out = append(out, alts)
		}
	}
	return out, nil
}

// ParseList reads a field without alternatives (Conflicts, Breaks, Provides, Replaces).
func ParseList(field string) ([]Relation, error) {
	p := parser{s: field}
	var out []Relation
	for p.more() {
		alts, err := p.alternatives()
		if err != nil {
			return nil, err
		}
		switch len(alts) {
		case 0:
		case 1:
			out = append(out, alts[0])
		default:
			return nil, p.errorf("alternatives (|) are not allowed in this field")
		}
	}
	return out, nil
}

// parser reads a field left to right.
type parser struct {
	s string
	i int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s, at byte %d of %q", ErrSyntax, fmt.Sprintf(format, args...), p.i, p.s)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *parser) skipSpace() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

// more reports whether anything but blanks is left.
func (p *parser) more() bool {
	p.skipSpace()
	return p.i < len(p.s)
}

// alternatives reads one comma-separated element and the comma after it; nil for an
// empty element ("a, , b" or a trailing comma, which dpkg tolerates).
func (p *parser) alternatives() ([]Relation, error) {
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ',' {
		p.i++
		return nil, nil
	}
	var alts []Relation
	for {
		r, err := p.relation()
		if err != nil {
			return nil, err
		}
		alts = append(alts, r)
		p.skipSpace()
		if p.i == len(p.s) {
			return alts, nil
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			return alts, nil
		case '|':
			p.i++
		default:
			return nil, p.errorf("expected ',' or '|'")
		}
	}
}

// relation reads "name[:arch] [(op version)]".
func (p *parser) relation() (Relation, error) {
	p.skipSpace()
	var r Relation
	start := p.i
	for p.i < len(p.s) && isNameByte(p.s[p.i]) {
		p.i++
	}
	r.Name = p.s[start:p.i]
	if err := checkName(r.Name); err != nil {
		return r, p.errorf("%v", err)
	}
	if p.i < len(p.s) && p.s[p.i] == ':' {
		p.i++
		start = p.i
		for p.i < len(p.s) && isArchByte(p.s[p.i]) {
			p.i++
		}
		r.Arch = p.s[start:p.i]
		if !validArch(r.Arch) {
			return r, p.errorf("architecture qualifier %q of %q is not an architecture name", r.Arch, r.Name)
		}
	}
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '(' {
		if err := p.constraint(&r); err != nil {
			return r, err
		}
		p.skipSpace()
	}
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '[':
			return r, p.errorf("architecture restrictions are for source packages, not a binary package's relations")
		case '<':
			return r, p.errorf("build profiles are for source packages, not a binary package's relations")
		}
	}
	return r, nil
}

// constraint reads "(op version)".
func (p *parser) constraint(r *Relation) error {
	p.i++ // '('
	p.skipSpace()
	r.Op = p.op()
	if r.Op == Any {
		return p.errorf("expected a version operator (<<, <=, =, >=, >>) for %q", r.Name)
	}
	p.skipSpace()
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ')' && !isSpace(p.s[p.i]) && p.s[p.i] != '(' {
		p.i++
	}
	r.Version = p.s[start:p.i]
	p.skipSpace()
	if p.i == len(p.s) || p.s[p.i] != ')' {
		return p.errorf("expected ')' after the version of %q", r.Name)
	}
	p.i++
	if r.Version == "" {
		return p.errorf("empty version for %q", r.Name)
	}
	if _, err := version.Parse(r.Version); err != nil {
		return p.errorf("version %q of %q: %v", r.Version, r.Name, err)
	}
	if err := checkVersion(r.Version); err != nil {
		return p.errorf("version %q of %q: %v", r.Version, r.Name, err)
	}
	return nil
}

// op reads an operator, or returns Any if none is there.
func (p *parser) op() Op {
	rest := p.s[p.i:]
	for _, c := range []struct {
		text string
		op   Op
	}{{"<<", Less}, {"<=", LessEq}, {">>", Greater}, {">=", GreaterEq}, {"=", Equal}, {"<", LessEq}, {">", GreaterEq}} {
		if strings.HasPrefix(rest, c.text) {
			p.i += len(c.text)
			return c.op
		}
	}
	return Any
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.' || c >= 'A' && c <= 'Z'
}

func isArchByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
}

// validArch reports whether s is an architecture's name: letters and digits in parts
// joined by single hyphens ("amd64", "kfreebsd-i386").
func validArch(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	return !strings.Contains(s, "--")
}

// checkName applies dpkg's rule for a package name: lowercase letters, digits, '+', '-'
// and '.', starting with a letter or digit.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty package name")
	}
	if c := name[0]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
		return fmt.Errorf("package name %q must start with a lowercase letter or a digit", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			return fmt.Errorf("package name %q has an uppercase letter", name)
		}
	}
	return nil
}

// checkVersion refuses what version.Parse lets through but dpkg does not: characters
// outside a version's alphabet.
func checkVersion(v string) error {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".+-~:", c) >= 0) {
			return fmt.Errorf("character %q is not allowed in a version", c)
		}
	}
	return nil
}
