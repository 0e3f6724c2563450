package deb

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"pault.ag/go/debian/control"
)

// ErrNotDsc is wrapped by every error about input that is not a well-formed Debian source
// control file (.dsc).
var ErrNotDsc = errors.New("not a Debian source control file")

// ErrSourceFile is wrapped by the error about a file a .dsc names that is missing beside
// it, or whose size or checksums are not those the .dsc lists.
var ErrSourceFile = errors.New("file of the source package does not match its .dsc")

// Source is what a Sources index needs to know about one source package: its .dsc
// (Filename, Size and digests, the file kept byte for byte with its signature) and the
// files the .dsc names (Parts), which sit beside it in the pool.
type Source struct {
	Name, Version     string
	Filename          string // the .dsc's base name
	Fields            []Field
	Size              int64
	MD5, SHA1, SHA256 string // of the .dsc
	Parts             []SourcePart
}

// SourcePart is one file a .dsc names.
type SourcePart struct {
	Name              string
	Size              int64
	MD5, SHA1, SHA256 string
}

// maxDscSize bounds the .dsc read into memory: real ones are a few kilobytes.
const maxDscSize = 4 << 20

// ReadDscFile reads a .dsc and checks every file it names, which must sit beside it with
// the size and checksums the .dsc lists. Errors name the .dsc and the field or file.
func ReadDscFile(path string) (*Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read source package: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDscSize+1))
	if err != nil {
		return nil, fmt.Errorf("read source package %s: %w", path, err)
	}
	if len(data) > maxDscSize {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", path, ErrNotDsc, maxDscSize)
	}
	s, err := ParseDsc(data, path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	for _, p := range s.Parts {
		if err := checkPart(filepath.Join(dir, p.Name), p); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return s, nil
}

// checkPart hashes the file at path and compares it with what the .dsc lists of it.
func checkPart(path string, p SourcePart) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %s is named by the .dsc but cannot be read beside it: %w", ErrSourceFile, p.Name, err)
	}
	defer f.Close()
	hs := []hash.Hash{md5.New(), sha1.New(), sha256.New()}
	n, err := io.Copy(io.MultiWriter(hs[0], hs[1], hs[2]), f)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if n != p.Size {
		return fmt.Errorf("%w: %s has %d bytes, the .dsc says %d", ErrSourceFile, p.Name, n, p.Size)
	}
	for i, want := range []struct{ field, sum string }{{"Files", p.MD5}, {"Checksums-Sha1", p.SHA1}, {"Checksums-Sha256", p.SHA256}} {
		if want.sum == "" {
			continue
		}
		if got := hex.EncodeToString(hs[i].Sum(nil)); got != want.sum {
			return fmt.Errorf("%w: %s has checksum %s, field %s of the .dsc says %s", ErrSourceFile, p.Name, got, want.field, want.sum)
		}
	}
	return nil
}

// hashFields are the .dsc's checksum fields, which a Sources stanza writes afresh with
// the .dsc itself added; Checksums-Sha512 is left out, as Debian's archive does.
var hashFields = map[string]bool{"files": true, "checksums-sha1": true, "checksums-sha256": true, "checksums-sha512": true}

// ParseDsc parses a .dsc (clearsigned or not; the signature is not checked here) with
// pault.ag/go/debian/control and checks what a Sources index relies on: Source, Version,
// Format, and the checksum fields, which must agree on each file's size. name labels
// errors and gives the .dsc's file name.
func ParseDsc(data []byte, name string) (*Source, error) {
	r, err := control.NewParagraphReader(bytes.NewReader(data), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrNotDsc, err)
	}
	para, err := r.Next()
	if err != nil {
		if err == io.EOF {
			err = errors.New("no control paragraph")
		}
		return nil, fmt.Errorf("%s: %w: %w", name, ErrNotDsc, err)
	}
	var d control.DSC
	if err := control.UnpackFromParagraph(*para, &d); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrNotDsc, err)
	}
	s := &Source{Filename: filepath.Base(name), Size: int64(len(data))}
	s.Name = strings.TrimSpace(para.Values["Source"])
	s.Version = strings.TrimSpace(para.Values["Version"])
	for _, f := range []struct {
		name string
		err  error
	}{
		{"Source", checkPackageName(s.Name)},
		{"Version", checkVersion(s.Version)},
	} {
		if f.err != nil {
			return nil, &FieldError{Path: name, Field: f.name, Err: f.err}
		}
	}
	if strings.TrimSpace(para.Values["Format"]) == "" {
		return nil, &FieldError{Path: name, Field: "Format", Err: ErrMissingField}
	}
	if s.Parts, err = dscParts(&d); err != nil {
		return nil, &FieldError{Path: name, Field: err.(*partError).field, Err: err.(*partError).err}
	}
	for _, k := range para.Order {
		v := strings.TrimRight(para.Values[k], "\n")
		if err := checkFieldName(k); err != nil {
			return nil, fmt.Errorf("%s: %w: %w", name, ErrNotDsc, err)
		}
		if strings.ContainsAny(v, "\r") {
			return nil, &FieldError{Path: name, Field: k, Err: errors.New("carriage return in value")}
		}
		if bytes.Contains(data, []byte("\n"+k+":\n")) || bytes.HasPrefix(data, []byte(k+":\n")) {
			v = "\n" + v // the value starts on a continuation line
		}
		s.Fields = append(s.Fields, Field{Name: k, Value: v})
	}
	if err := checkUTF8(name, s.Fields); err != nil {
		return nil, err
	}
	md, s1, s256 := md5.Sum(data), sha1.Sum(data), sha256.Sum256(data)
	s.MD5, s.SHA1, s.SHA256 = hex.EncodeToString(md[:]), hex.EncodeToString(s1[:]), hex.EncodeToString(s256[:])
	return s, nil
}

type partError struct {
	field string
	err   error
}

func (e *partError) Error() string { return e.field + ": " + e.err.Error() }

// dscParts joins the .dsc's Files, Checksums-Sha1 and Checksums-Sha256 lists by file
// name. Files and Checksums-Sha256 are required, and must name the same files.
func dscParts(d *control.DSC) ([]SourcePart, error) {
	if len(d.Files) == 0 {
		return nil, &partError{"Files", ErrMissingField}
	}
	if len(d.ChecksumsSha256) == 0 {
		return nil, &partError{"Checksums-Sha256", ErrMissingField}
	}
	var parts []SourcePart
	at := map[string]int{}
	for _, f := range d.Files {
		if err := checkPartName(f.Filename); err != nil {
			return nil, &partError{"Files", err}
		}
		if _, dup := at[f.Filename]; dup {
			return nil, &partError{"Files", fmt.Errorf("%s is listed twice", f.Filename)}
		}
		if !isHex(f.Hash, 32) || f.Size < 0 {
			return nil, &partError{"Files", fmt.Errorf("invalid entry for %s", f.Filename)}
		}
		at[f.Filename] = len(parts)
		parts = append(parts, SourcePart{Name: f.Filename, Size: f.Size, MD5: f.Hash})
	}
	set := func(field string, name, sum string, size int64, n int, put func(*SourcePart, string)) error {
		i, ok := at[name]
		switch {
		case !ok:
			return &partError{field, fmt.Errorf("%s is not listed in Files", name)}
		case !isHex(sum, n):
			return &partError{field, fmt.Errorf("invalid checksum for %s", name)}
		case parts[i].Size != size:
			return &partError{field, fmt.Errorf("%s has size %d here and %d in Files", name, size, parts[i].Size)}
		}
		put(&parts[i], sum)
		return nil
	}
	for _, f := range d.ChecksumsSha1 {
		if err := set("Checksums-Sha1", f.Filename, f.Hash, f.Size, 40, func(p *SourcePart, s string) { p.SHA1 = s }); err != nil {
			return nil, err
		}
	}
	for _, f := range d.ChecksumsSha256 {
		if err := set("Checksums-Sha256", f.Filename, f.Hash, f.Size, 64, func(p *SourcePart, s string) { p.SHA256 = s }); err != nil {
			return nil, err
		}
	}
	for _, p := range parts {
		if p.SHA256 == "" {
			return nil, &partError{"Checksums-Sha256", fmt.Errorf("%s is listed in Files but not here", p.Name)}
		}
	}
	return parts, nil
}

// checkPartName accepts a plain file name: a .dsc names files beside it, never a path.
func checkPartName(s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00 \t\n") || len(s) > 255 {
		return fmt.Errorf("invalid file name %q: a .dsc names files beside it", truncate(s))
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// SourceStanza returns the source package's Sources stanza, as dak writes it: Package
// (the .dsc's Source), then the .dsc's fields in their order with the checksum fields
// listing the .dsc itself before its files, then Directory (dir, the pool directory), and
// Priority and Section when the .dsc's Package-List gives them (its first package's, as
// armor has no override file). It ends with a single "\n".
func (s *Source) Stanza(dir string) []byte {
	var b bytes.Buffer
	writeField(&b, "Package", s.Name)
	for _, f := range s.Fields {
		lower := strings.ToLower(f.Name)
		switch {
		case lower == "source" || lower == "directory" || lower == "checksums-sha512":
			continue
		case hashFields[lower]:
			writeField(&b, f.Name, s.hashList(lower))
		default:
			writeField(&b, f.Name, continuation(f.Value))
		}
	}
	writeField(&b, "Directory", dir)
	if prio, sect := s.priorityAndSection(); prio != "" {
		writeField(&b, "Priority", prio)
		writeField(&b, "Section", sect)
	}
	return b.Bytes()
}

// priorityAndSection returns the priority and section of the first package in the
// .dsc's Package-List ("name type section priority ..."), or "".
func (s *Source) priorityAndSection() (string, string) {
	for _, f := range s.Fields {
		if !strings.EqualFold(f.Name, "Package-List") {
			continue
		}
		for _, line := range strings.Split(f.Value, "\n") {
			if w := strings.Fields(line); len(w) >= 4 && w[2] != "-" && w[3] != "-" {
				return w[3], w[2]
			}
		}
	}
	return "", ""
}

// hashList is the value of a checksum field: "\n sum size name" for the .dsc and each part.
func (s *Source) hashList(field string) string {
	pick := func(md, s1, s256 string) string {
		switch field {
		case "files":
			return md
		case "checksums-sha1":
			return s1
		}
		return s256
	}
	var b strings.Builder
	line := func(sum string, size int64, name string) {
		if sum == "" {
			return
		}
		b.WriteString("\n ")
		b.WriteString(sum)
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(size, 10))
		b.WriteByte(' ')
		b.WriteString(name)
	}
	line(pick(s.MD5, s.SHA1, s.SHA256), s.Size, s.Filename)
	for _, p := range s.Parts {
		line(pick(p.MD5, p.SHA1, p.SHA256), p.Size, p.Name)
	}
	return b.String()
}

// continuation turns a parsed value (lines joined by "\n", continuation markers taken
// off) back into control syntax: each further line after " ", an empty one as " .".
func continuation(v string) string {
	if !strings.Contains(v, "\n") {
		return v
	}
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(v))
	first := true
	for sc.Scan() {
		line := sc.Text()
		if !first {
			b.WriteString("\n ")
			if line == "" {
				line = "."
			}
		}
		b.WriteString(line)
		first = false
	}
	return b.String()
}
