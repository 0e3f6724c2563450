package deb

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
)

// ErrNotDeb is wrapped by every error about input that is not a well-formed Debian
// binary package: not an ar archive, a missing or misplaced member, an unsupported
// format version or compression, a malformed control file, or a truncated file.
var ErrNotDeb = errors.New("not a Debian binary package")

// ErrTruncated is wrapped (together with ErrNotDeb) when the input ends before the
// archive does, or holds fewer bytes than the size the caller announced.
var ErrTruncated = errors.New("truncated")

// ErrMissingField is wrapped by a FieldError for a required field that is absent.
var ErrMissingField = errors.New("required field is missing")

// FieldError reports a control field that is missing or holds an invalid value.
// Its message names the file and the field: "hello_2.10.deb: field Version: ...".
type FieldError struct {
	Path  string // the name the package was read under
	Field string // the control field, as Debian spells it
	Err   error
}

func (e *FieldError) Error() string {
	return e.Path + ": field " + e.Field + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Field is one field of a control paragraph. Value has no trailing newline; a
// multi-line value holds its continuation lines exactly as the control file has
// them, each after a "\n" and starting with its space (" .", " text").
type Field struct{ Name, Value string }

// Package is what an index needs to know about one .deb file.
type Package struct {
	Name, Version, Architecture string
	Source                      string  // source package name; Name when the control file has no Source
	SourceVersion               string  // from "Source: foo (1.0-1)", else Version
	Fields                      []Field // the control paragraph in its original order
	Size                        int64
	MD5, SHA1, SHA256           string // lowercase hex of the whole .deb
	// Files lists what the package installs, as a Contents file lists it: every entry of
	// data.tar but directories, relative to the root without "./", sorted, each once.
	Files []string
}

// Value returns the value of the named control field (names match without regard
// to case, as in deb822) and whether the field is present.
func (p *Package) Value(name string) (string, bool) {
	for _, f := range p.Fields {
		if strings.EqualFold(f.Name, name) {
			return f.Value, true
		}
	}
	return "", false
}

// ReadFile reads a .deb once, computing its digests while it extracts the control
// paragraph and lists data.tar's files. Errors name the path and, for field problems, the field (see
// FieldError); structural problems wrap ErrNotDeb. ReadFile and Read are safe
// for concurrent use.
func ReadFile(path string) (*Package, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read package: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read package: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s: %w: is a directory", path, ErrNotDeb)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: not a regular file", path, ErrNotDeb)
	}
	return Read(f, path, fi.Size())
}

// Read does what ReadFile does, from a stream that it reads to its end. name labels
// errors. If size is not negative, the stream must hold exactly size bytes.
func Read(r io.Reader, name string, size int64) (*Package, error) {
	s := getScanner(r)
	defer putScanner(s)
	control, files, err := s.scan(name)
	if err != nil {
		return nil, err
	}
	if size >= 0 && s.d.n != size {
		if s.d.n < size {
			return nil, fmt.Errorf("%s: %w: %w: read %d of %d bytes", name, ErrTruncated, ErrNotDeb, s.d.n, size)
		}
		return nil, fmt.Errorf("%s: read %d bytes, expected %d: the file changed while it was read", name, s.d.n, size)
	}
	p, err := newPackage(name, control)
	if err != nil {
		return nil, err
	}
	p.Files = files
	p.Size = s.d.n
	p.MD5 = hex.EncodeToString(s.d.md5.Sum(nil))
	p.SHA1 = hex.EncodeToString(s.d.sha1.Sum(nil))
	p.SHA256 = hex.EncodeToString(s.d.sha256.Sum(nil))
	return p, nil
}

// digester hashes and counts every byte read through it.
type digester struct {
	r                 io.Reader
	md5, sha1, sha256 hash.Hash
	n                 int64
}

func newDigester() *digester {
	return &digester{md5: md5.New(), sha1: sha1.New(), sha256: sha256.New()}
}

func (d *digester) reset(r io.Reader) {
	d.r = r
	d.n = 0
	d.md5.Reset()
	d.sha1.Reset()
	d.sha256.Reset()
}

// parallelHashMin is the chunk size from which MD5 runs on a goroutine of its
// own beside SHA-1 and SHA-256: MD5 alone takes about as long as the other two
// together, so a large package is hashed in about half the time when a second
// processor is free. Small chunks are not worth the hand-off.
const parallelHashMin = 64 << 10

func (d *digester) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if n >= parallelHashMin {
		done := make(chan struct{})
		go func() {
			d.md5.Write(p[:n])
			close(done)
		}()
		d.sha1.Write(p[:n])
		d.sha256.Write(p[:n])
		<-done
	} else if n > 0 {
		d.md5.Write(p[:n])
		d.sha1.Write(p[:n])
		d.sha256.Write(p[:n])
	}
	d.n += int64(n)
	return n, err
}
