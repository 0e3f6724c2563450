package deb

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"pault.ag/go/debian/version"
)

// parseControl parses a binary package's control file: one deb822 paragraph.
// Continuation lines are kept as they are (less trailing white space), so a
// stanza written from the fields reproduces them. Lines starting with "#" are
// comments; blank lines may surround the paragraph but not split it.
func parseControl(b []byte) ([]Field, error) {
	s := string(b) // one copy; field values share it
	fields := make([]Field, 0, 16)
	ended := false
	for lineNo := 1; len(s) > 0; lineNo++ {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		line = strings.TrimRight(line, " \t\r")
		switch {
		case line == "":
			ended = len(fields) > 0
		case ended:
			return nil, fmt.Errorf("line %d: a second paragraph starts; a control file holds one", lineNo)
		case line[0] == '#':
		case line[0] == ' ' || line[0] == '\t':
			if len(fields) == 0 {
				return nil, fmt.Errorf("line %d: continuation line before any field", lineNo)
			}
			f := &fields[len(fields)-1]
			f.Value += "\n" + line
		default:
			colon := strings.IndexByte(line, ':')
			if colon < 0 {
				return nil, fmt.Errorf("line %d: %q is neither a field nor a continuation line", lineNo, truncate(line))
			}
			name := line[:colon]
			if err := checkFieldName(name); err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			for _, f := range fields {
				if strings.EqualFold(f.Name, name) {
					return nil, fmt.Errorf("line %d: field %s appears twice", lineNo, name)
				}
			}
			fields = append(fields, Field{Name: name, Value: strings.TrimLeft(line[colon+1:], " \t")})
		}
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("no fields")
	}
	return fields, nil
}

// checkFieldName applies deb822's rule: printable US-ASCII other than space and
// colon, not starting with "#" or "-".
func checkFieldName(name string) error {
	if name == "" {
		return fmt.Errorf("empty field name")
	}
	if name[0] == '-' || name[0] == '#' {
		return fmt.Errorf("field name %q starts with %q", truncate(name), name[0])
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("field name %q holds byte %#x", truncate(name), c)
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// newPackage validates a control file and fills a Package from it.
func newPackage(name string, control []byte) (*Package, error) {
	fields, err := parseControl(control)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: control file: %w", name, ErrNotDeb, err)
	}
	if err := checkUTF8(name, fields); err != nil {
		return nil, err
	}
	p := &Package{Fields: fields}
	required := func(field string) (string, error) {
		v, ok := p.Value(field)
		if !ok {
			return "", &FieldError{Path: name, Field: field, Err: ErrMissingField}
		}
		return v, nil
	}
	if p.Name, err = required("Package"); err != nil {
		return nil, err
	}
	if err := checkPackageName(p.Name); err != nil {
		return nil, &FieldError{Path: name, Field: "Package", Err: err}
	}
	if p.Version, err = required("Version"); err != nil {
		return nil, err
	}
	if err := checkVersion(p.Version); err != nil {
		return nil, &FieldError{Path: name, Field: "Version", Err: err}
	}
	if p.Architecture, err = required("Architecture"); err != nil {
		return nil, err
	}
	if err := checkArch(p.Architecture); err != nil {
		return nil, &FieldError{Path: name, Field: "Architecture", Err: err}
	}
	p.Source, p.SourceVersion = p.Name, p.Version
	if src, ok := p.Value("Source"); ok {
		if p.Source, p.SourceVersion, err = parseSource(src, p.Version); err != nil {
			return nil, &FieldError{Path: name, Field: "Source", Err: err}
		}
	}
	return p, nil
}

// ErrNotUTF8 is wrapped by a FieldError for a value that is not valid UTF-8: Debian
// Policy 5.1 makes control files UTF-8, and apt, the page and every index reader take the
// Packages file as UTF-8, so such a value is refused rather than published as it is.
var ErrNotUTF8 = errors.New("not valid UTF-8")

// checkUTF8 refuses a field whose value is not valid UTF-8, naming the byte.
func checkUTF8(name string, fields []Field) error {
	for _, f := range fields {
		if utf8.ValidString(f.Value) {
			continue
		}
		at := 0
		for at < len(f.Value) {
			r, n := utf8.DecodeRuneInString(f.Value[at:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			at += n
		}
		return &FieldError{Path: name, Field: f.Name, Err: fmt.Errorf("%w: byte %#x at offset %d of the value (Debian control files are UTF-8: convert it, e.g. iconv -f latin1 -t utf-8)", ErrNotUTF8, f.Value[at], at)}
	}
	return nil
}

// checkPackageName applies Debian Policy 5.6.1: at least two characters from
// [a-z0-9+.-], starting with a letter or digit.
func checkPackageName(s string) error {
	ok := len(s) >= 2 && isLowerAlnum(s[0])
	for i := 1; ok && i < len(s); i++ {
		c := s[i]
		ok = isLowerAlnum(c) || c == '+' || c == '-' || c == '.'
	}
	if !ok {
		return fmt.Errorf("invalid package name %q: Debian Policy allows [a-z0-9][a-z0-9+.-]+", truncate(s))
	}
	return nil
}

// checkArch accepts what can name a binary package's architecture: "all" or a
// Debian architecture such as amd64, arm64 or musl-linux-i386. Wildcards such as
// "any" and the pseudo-architecture "source" are rejected.
func checkArch(s string) error {
	ok := len(s) >= 2 && len(s) <= 64 && isLowerAlnum(s[0]) && isLowerAlnum(s[len(s)-1])
	for i := 1; ok && i < len(s)-1; i++ {
		ok = isLowerAlnum(s[i]) || s[i] == '-'
	}
	if !ok {
		return fmt.Errorf("invalid architecture %q: want \"all\" or a name like amd64", truncate(s))
	}
	if s == "any" || s == "source" || strings.HasPrefix(s, "any-") || strings.HasSuffix(s, "-any") {
		return fmt.Errorf("architecture %q is not one a binary package can have", s)
	}
	return nil
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// checkVersion parses a version as dpkg does, adding the two checks that
// pault.ag/go/debian/version leaves out: an empty upstream part and an empty
// revision after a hyphen.
func checkVersion(s string) error {
	if _, err := version.Parse(s); err != nil {
		return fmt.Errorf("invalid version %q: %w", truncate(s), err)
	}
	upstream := s
	if i := strings.IndexByte(upstream, ':'); i >= 0 {
		upstream = upstream[i+1:]
	}
	if strings.HasSuffix(upstream, "-") {
		return fmt.Errorf("invalid version %q: revision is empty", s)
	}
	if i := strings.LastIndexByte(upstream, '-'); i == 0 || upstream == "" {
		return fmt.Errorf("invalid version %q: upstream version is empty", s)
	}
	if s != strings.TrimSpace(s) {
		return fmt.Errorf("invalid version %q: surrounding white space", s)
	}
	return nil
}

// parseSource splits "foo (1.0-1)" into its name and version; a bare "foo" takes
// the binary package's version.
func parseSource(s, binVersion string) (string, string, error) {
	name, ver := s, binVersion
	if i := strings.IndexByte(s, '('); i >= 0 {
		rest := s[i+1:]
		if !strings.HasSuffix(rest, ")") {
			return "", "", fmt.Errorf("invalid value %q: want \"name\" or \"name (version)\"", truncate(s))
		}
		name = strings.TrimRight(s[:i], " ")
		ver = strings.TrimSpace(strings.TrimSuffix(rest, ")"))
		if err := checkVersion(ver); err != nil {
			return "", "", err
		}
	}
	if err := checkPackageName(name); err != nil {
		return "", "", err
	}
	return name, ver, nil
}

// writeField appends "Name: Value\n" to b. A value whose first line is empty
// (only continuation lines) gets no space after the colon.
func writeField(b *bytes.Buffer, name, value string) {
	b.WriteString(name)
	b.WriteByte(':')
	if value != "" && value[0] != '\n' {
		b.WriteByte(' ')
	}
	b.WriteString(value)
	b.WriteByte('\n')
}
