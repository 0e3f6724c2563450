package deb

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/armor-apt/armor/manifest"
)

// Reading Packages and Sources indexes. controld holds a release's manifest to the
// indexes its signed Release lists: each stanza names a file apt will download (its path,
// size and SHA-256), and nothing else may be served. The reader is a streaming one, so a
// decompressed index of 80 MB need not be held in memory, and it is strict where apt and
// this reader could read one text two ways: a field of interest given twice, a white-space
// line (apt takes it for a continuation line, a paragraph reader might end the stanza on
// it), a comment line (apt reads none in an index), a carriage return. Each is an error
// naming the line.

// IndexKind says which index a text is.
type IndexKind int

const (
	// PackagesIndex is a binary-<arch>/Packages index, of .deb or, under
	// debian-installer, .udeb files.
	PackagesIndex IndexKind = iota
	// SourcesIndex is a source/Sources index.
	SourcesIndex
)

// ErrIndex is wrapped by every error about a malformed index.
var ErrIndex = errors.New("malformed index")

// IndexEntry is one stanza of an index: the package and the files apt downloads for it.
type IndexEntry struct {
	Name, Version string
	// Architecture is the stanza's own; "source" for a Sources stanza.
	Architecture string
	// Path, Size and SHA256 are Filename, Size and SHA256 of a Packages stanza, or the
	// .dsc of a Sources stanza (its Checksums-Sha256 line, under Directory).
	Path   string
	Size   int64
	SHA256 string
	// Phased is Phased-Update-Percentage, "" when the stanza has none.
	Phased string
	// Files are the other files of a source package, as Checksums-Sha256 lists them
	// (under Directory), in its order. None for a binary package.
	Files []manifest.File
	// Line is the first line of the stanza in the index (1 for the first line).
	Line int
}

// IndexReader parses an index written to it in pieces of any size (it is an io.Writer),
// and calls fn with each stanza once the stanza is complete. fn's error stops the reader
// and is returned by Write or Close.
type IndexReader struct {
	kind  IndexKind
	fn    func(*IndexEntry) error
	carry []byte // an incomplete stanza: the text after the last blank line
	line  int    // the line the carry starts on
	count int    // stanzas handed to fn
	err   error
}

// NewIndexReader returns a reader of an index of kind that calls fn with each stanza.
func NewIndexReader(kind IndexKind, fn func(*IndexEntry) error) *IndexReader {
	return &IndexReader{kind: kind, fn: fn, line: 1}
}

// Write parses the complete stanzas among p and what came before it.
func (r *IndexReader) Write(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	buf := p
	if len(r.carry) > 0 {
		r.carry = append(r.carry, p...)
		buf = r.carry
	}
	end := bytes.LastIndex(buf, []byte("\n\n"))
	if end < 0 {
		if len(r.carry) == 0 {
			r.carry = append(r.carry, p...)
		}
		return len(p), nil
	}
	end += 2
	r.err = r.parse(buf[:end])
	rest := buf[end:]
	if len(r.carry) > 0 {
		r.carry = append(r.carry[:0], rest...) // overlapping move to the front
	} else {
		r.carry = append(r.carry, rest...)
	}
	if r.err != nil {
		return 0, r.err
	}
	return len(p), nil
}

// Count returns the number of stanzas handed to fn so far.
func (r *IndexReader) Count() int { return r.count }

// AtBoundary reports whether the text written so far ends where a stanza ends (after a
// blank line, or at the very start): what follows starts a new stanza.
func (r *IndexReader) AtBoundary() bool { return len(r.carry) == 0 }

// Close parses the last stanza, which may end without a blank line.
func (r *IndexReader) Close() error {
	if r.err != nil {
		return r.err
	}
	r.err = r.parse(r.carry)
	r.carry = nil
	return r.err
}

// parse parses text, which ends with a blank line or is the end of the index.
func (r *IndexReader) parse(text []byte) error {
	var st stanza
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		n := r.line
		r.line++
		if len(line) == 0 {
			if st.started {
				if err := r.finish(&st); err != nil {
					return err
				}
				st = stanza{}
			}
			continue
		}
		if err := st.add(line, n); err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrIndex, n, err)
		}
	}
	if st.started {
		return r.finish(&st)
	}
	return nil
}

// finish turns a complete stanza into an entry and hands it to fn.
func (r *IndexReader) finish(st *stanza) error {
	var e *IndexEntry
	var err error
	if r.kind == SourcesIndex {
		e, err = st.sourceEntry()
	} else {
		e, err = st.binaryEntry()
	}
	if err != nil {
		what := ""
		if st.present[fPackage] {
			what = " (package " + truncate(string(st.values[fPackage])) + ")"
		}
		return fmt.Errorf("%w: stanza at line %d%s: %w", ErrIndex, st.line, what, err)
	}
	r.count++
	return r.fn(e)
}

// The fields of a stanza the reader keeps; the others are checked for syntax only.
const (
	fPackage = iota
	fVersion
	fArchitecture
	fFilename
	fSize
	fSHA256
	fPhased
	fDirectory
	fChecksums
	nFields
)

var indexFields = [nFields]string{"Package", "Version", "Architecture", "Filename", "Size", "SHA256",
	"Phased-Update-Percentage", "Directory", "Checksums-Sha256"}

// stanza collects the fields of interest of one stanza as it is read.
type stanza struct {
	started bool
	line    int
	present [nFields]bool
	values  [nFields][]byte // the value's first line
	conts   [nFields][][]byte
	cur     int // the field continuation lines belong to; -1 for one not kept
}

// add reads one non-empty line of the stanza.
func (st *stanza) add(line []byte, n int) error {
	if !st.started {
		st.started, st.line, st.cur = true, n, -1
		if line[0] == ' ' || line[0] == '\t' {
			return errors.New("continuation line before any field")
		}
	}
	switch {
	case bytes.IndexByte(line, '\r') >= 0:
		return errors.New("carriage return")
	case line[0] == '#':
		return errors.New("comment line (an index has none)")
	case line[0] == ' ' || line[0] == '\t':
		if len(bytes.TrimLeft(line, " \t")) == 0 {
			return errors.New("a line of white space only (apt would read it as a continuation line)")
		}
		if st.cur >= 0 {
			st.conts[st.cur] = append(st.conts[st.cur], bytes.TrimSpace(line))
		}
		return nil
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return fmt.Errorf("%q is neither a field nor a continuation line", truncate(string(line)))
	}
	name := line[:colon]
	if err := checkFieldName(string(name)); err != nil {
		return err
	}
	st.cur = -1
	for i, f := range indexFields {
		if len(name) == len(f) && strings.EqualFold(string(name), f) {
			if st.present[i] {
				return fmt.Errorf("field %s appears twice", f)
			}
			st.present[i], st.values[i] = true, bytes.Trim(line[colon+1:], " \t")
			st.cur = i
			break
		}
	}
	return nil
}

// required returns a field's value; a missing, empty or multi-line one is an error.
func (st *stanza) required(f int) (string, error) {
	v := st.values[f]
	switch {
	case !st.present[f]:
		return "", fmt.Errorf("field %s: %w", indexFields[f], ErrMissingField)
	case len(v) == 0 || len(st.conts[f]) > 0:
		return "", fmt.Errorf("field %s: not a one-line value", indexFields[f])
	}
	return string(v), nil
}

// identity reads Package, Version and, for a binary stanza, Architecture.
func (st *stanza) identity(e *IndexEntry, arch bool) error {
	var err error
	if e.Name, err = st.required(fPackage); err != nil {
		return err
	}
	if e.Version, err = st.required(fVersion); err != nil {
		return err
	}
	if arch {
		e.Architecture, err = st.required(fArchitecture)
	}
	return err
}

func (st *stanza) binaryEntry() (*IndexEntry, error) {
	e := &IndexEntry{Line: st.line}
	if err := st.identity(e, true); err != nil {
		return nil, err
	}
	var size string
	var err error
	if e.Path, err = st.required(fFilename); err != nil {
		return nil, err
	}
	if !manifest.ValidPath(e.Path) {
		return nil, fmt.Errorf("field Filename: %q is not a clean relative path", truncate(e.Path))
	}
	if size, err = st.required(fSize); err != nil {
		return nil, err
	}
	if e.Size, err = parseIndexSize(size); err != nil {
		return nil, fmt.Errorf("field Size: %w", err)
	}
	if e.SHA256, err = st.required(fSHA256); err != nil {
		return nil, err
	}
	if !manifest.ValidDigest(e.SHA256) {
		return nil, fmt.Errorf("field SHA256: %q is not 64 lowercase hex digits", truncate(e.SHA256))
	}
	if st.present[fPhased] {
		if e.Phased, err = st.required(fPhased); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (st *stanza) sourceEntry() (*IndexEntry, error) {
	e := &IndexEntry{Line: st.line, Architecture: "source"}
	if err := st.identity(e, false); err != nil {
		return nil, err
	}
	dir, err := st.required(fDirectory)
	if err != nil {
		return nil, err
	}
	if !manifest.ValidPath(dir) {
		return nil, fmt.Errorf("field Directory: %q is not a clean relative path", truncate(dir))
	}
	if !st.present[fChecksums] {
		return nil, fmt.Errorf("field Checksums-Sha256: %w", ErrMissingField)
	}
	if len(st.values[fChecksums]) > 0 || len(st.conts[fChecksums]) == 0 {
		return nil, errors.New("field Checksums-Sha256: not a list of \"sha256 size name\" lines")
	}
	seen := map[string]bool{}
	for _, l := range st.conts[fChecksums] {
		f, err := checksumLine(string(l), dir)
		if err != nil {
			return nil, fmt.Errorf("field Checksums-Sha256: %w", err)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("field Checksums-Sha256: %s is listed twice", f.Path)
		}
		seen[f.Path] = true
		if !strings.HasSuffix(f.Path, ".dsc") {
			e.Files = append(e.Files, f)
			continue
		}
		if e.Path != "" {
			return nil, fmt.Errorf("field Checksums-Sha256: two .dsc files, %s and %s", e.Path, f.Path)
		}
		e.Path, e.Size, e.SHA256 = f.Path, f.Size, f.SHA256
	}
	if e.Path == "" {
		return nil, errors.New("field Checksums-Sha256: no .dsc file")
	}
	return e, nil
}

// checksumLine parses "sha256 size name" into a file under dir.
func checksumLine(l, dir string) (manifest.File, error) {
	parts := strings.Fields(l)
	if len(parts) != 3 {
		return manifest.File{}, fmt.Errorf("%q is not \"sha256 size name\"", truncate(l))
	}
	if !manifest.ValidDigest(parts[0]) {
		return manifest.File{}, fmt.Errorf("%q: not 64 lowercase hex digits", truncate(parts[0]))
	}
	size, err := parseIndexSize(parts[1])
	if err != nil {
		return manifest.File{}, fmt.Errorf("%s: %w", truncate(parts[2]), err)
	}
	if strings.Contains(parts[2], "/") || !manifest.ValidPath(parts[2]) {
		return manifest.File{}, fmt.Errorf("%q is not a file name", truncate(parts[2]))
	}
	return manifest.File{Path: dir + "/" + parts[2], Size: size, SHA256: parts[0]}, nil
}

// parseIndexSize reads a size as apt does: decimal digits only.
func parseIndexSize(s string) (int64, error) {
	if s == "" || len(s) > 18 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a size in bytes", truncate(s))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size in bytes", truncate(s))
	}
	return n, nil
}
