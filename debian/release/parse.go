package release

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/armor-apt/armor/manifest"
)

// File is a parsed Release file.
type File struct {
	text   string // what was parsed
	fields []field
	// Sums are the MD5Sum, SHA1 and SHA256 sections by path, relative to
	// dists/<codename>/. A path missing from a section has that sum empty.
	Sums map[string]Digests
}

type field struct {
	name, value string // value: of the first line, trimmed
	start, end  int    // the field's first line in text, its newline included
	bodyEnd     int    // the end of its continuation lines in text
}

// section is one of the sums sections Parse reads.
type section struct {
	name   string
	hexLen int
	what   string // in errors
	sum    func(*Digests) *string
}

var sections = []section{
	{"MD5Sum", 32, "md5 sum", func(d *Digests) *string { return &d.MD5 }},
	{"SHA1", 40, "sha1", func(d *Digests) *string { return &d.SHA1 }},
	{"SHA256", 64, "sha256", func(d *Digests) *string { return &d.SHA256 }},
}

// Parse reads a Release file as apt does: one deb822 paragraph (leading blank lines
// skipped, anything after its end ignored), field names case-insensitive, a continuation
// line starting with a space or a tab. Each line of MD5Sum, SHA1 and SHA256, the first
// line's value included, is "<hash> <size> <path>" separated by spaces or tabs.
//
// It is strict where apt would misread: a line that is neither a field nor a
// continuation, a field given twice, a hash that is not lowercase hex of its length, a size
// that is not a decimal number, a path that is not clean and relative, a path listed twice
// in one section with different sums, or with different sizes in two sections, are each
// an error naming the line. A CR before a newline is ignored.
func Parse(data []byte) (*File, error) {
	f := &File{text: string(data), Sums: map[string]Digests{}}
	seen := map[string]bool{}
	var cur *section // the sums section being read, or nil
	text, off := f.text, 0
	for n := 1; off < len(text); n++ {
		start := off
		line, _, found := strings.Cut(text[off:], "\n")
		off += len(line)
		if found {
			off++
		}
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			if len(f.fields) > 0 {
				break // the end of the paragraph: apt reads no further
			}
			continue
		}
		var err error
		if line[0] == ' ' || line[0] == '\t' {
			if len(f.fields) == 0 {
				return nil, fmt.Errorf("release line %d: continuation line %q before any field", n, line)
			}
			f.fields[len(f.fields)-1].bodyEnd = off
			if cur != nil {
				err = cur.entry(f, line)
			}
		} else {
			name, value, ok := strings.Cut(line, ":")
			if !ok || name == "" || strings.ContainsAny(name, " \t") {
				return nil, fmt.Errorf("release line %d: %q is neither a field nor a continuation line", n, line)
			}
			if key := strings.ToLower(name); seen[key] {
				return nil, fmt.Errorf("release line %d: the %s field appears twice", n, name)
			} else {
				seen[key] = true
			}
			value = strings.TrimSpace(value)
			f.fields = append(f.fields, field{name: name, value: value, start: start, end: off, bodyEnd: off})
			cur = sectionNamed(name)
			if cur != nil && value != "" {
				err = cur.entry(f, value) // apt reads sums from the field's first line too
			}
		}
		if err != nil {
			return nil, fmt.Errorf("release line %d: %w", n, err)
		}
	}
	return f, nil
}

func sectionNamed(name string) *section {
	for i := range sections {
		if strings.EqualFold(name, sections[i].name) {
			return &sections[i]
		}
	}
	return nil
}

// entry adds one "<hash> <size> <path>" line of the section to f.Sums.
func (s *section) entry(f *File, line string) error {
	w := strings.FieldsFunc(line, func(c rune) bool { return c == ' ' || c == '\t' })
	if len(w) != 3 {
		return fmt.Errorf("want \"<hash> <size> <path>\", got %q", strings.TrimSpace(line))
	}
	sum, path := w[0], w[2]
	if !isHex(sum, s.hexLen) {
		return fmt.Errorf("%q is not a %s", sum, s.what)
	}
	size, ok := parseSize(w[1])
	if !ok {
		return fmt.Errorf("bad size %q", w[1])
	}
	if !manifest.ValidPath(path) {
		return fmt.Errorf("path %q is not a clean relative path", path)
	}
	d, listed := f.Sums[path]
	if prev := *s.sum(&d); prev != "" {
		if prev != sum || d.Size != size {
			return fmt.Errorf("%s is listed twice, with different sums", path)
		}
		return nil
	}
	if listed && d.Size != size {
		return fmt.Errorf("%s is listed with sizes %d and %d", path, d.Size, size)
	}
	*s.sum(&d) = sum
	d.Size = size
	f.Sums[path] = d
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseSize reads a decimal size: digits only, below 2^62.
func parseSize(s string) (int64, bool) {
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' || n > (1<<62)/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, s != ""
}

// Field returns the value of the named field, whose name is matched case-insensitively,
// or "" when there is none. The value is trimmed; the lines of a multi-line value are
// joined by newlines, each trimmed.
func (f *File) Field(name string) string {
	fl := f.field(name)
	if fl == nil {
		return ""
	}
	if fl.bodyEnd == fl.end {
		return fl.value
	}
	var b strings.Builder
	b.WriteString(fl.value)
	for _, line := range strings.SplitAfter(f.text[fl.end:fl.bodyEnd], "\n") {
		if line != "" {
			b.WriteByte('\n')
			b.WriteString(strings.TrimSpace(line))
		}
	}
	return b.String()
}

func (f *File) field(name string) *field {
	for i := range f.fields {
		if strings.EqualFold(f.fields[i].name, name) {
			return &f.fields[i]
		}
	}
	return nil
}

// AcquireByHash reports whether the Acquire-By-Hash field is true, read as apt reads a
// boolean: yes, true, with, on or enable in any case, or a non-zero number.
func (f *File) AcquireByHash() bool {
	v := strings.ToLower(f.Field("Acquire-By-Hash"))
	switch v {
	case "yes", "true", "with", "on", "enable":
		return true
	}
	n, err := strconv.ParseInt(v, 0, 64)
	return err == nil && n != 0
}

// Paths returns the paths of Sums, sorted.
func (f *File) Paths() []string {
	paths := make([]string, 0, len(f.Sums))
	for p := range f.Sums {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

// Date returns the Date field; it is an error when it is missing or does not parse.
func (f *File) Date() (time.Time, error) {
	v := f.Field("Date")
	if v == "" {
		return time.Time{}, fmt.Errorf("release has no Date field")
	}
	t, err := ParseDate(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("release Date %q: %w", v, err)
	}
	return t, nil
}

// ValidUntil returns the Valid-Until field, the zero time when there is none.
func (f *File) ValidUntil() (time.Time, error) {
	v := f.Field("Valid-Until")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := ParseDate(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("release Valid-Until %q: %w", v, err)
	}
	return t, nil
}
