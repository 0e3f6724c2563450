package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/armor-apt/armor/internal/tomlfile"

	"github.com/pelletier/go-toml/v2"
)

const header = "# armor release manifest, written by `armor build`. Commit it; do not edit it by hand.\n\n"

// Encode writes m in canonical form: a fixed header, fields in struct order, packages and
// files sorted. The same manifest always encodes to the same bytes.
func Encode(w io.Writer, m *Manifest) error {
	b, err := Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Marshal returns the canonical encoding of m. It sorts m in place first.
func Marshal(m *Manifest) ([]byte, error) {
	m.Sort()
	if plainString(m.ID) {
		b := make([]byte, 0, canonicalSize(m, m.ID))
		if b, _, ok := appendCanonical(b, m, m.ID); ok {
			return b, nil
		}
	}
	return marshalTOML(m)
}

// marshalTOML is Marshal through go-toml's encoder, for manifests with strings outside
// the plain subset (and for the test that keeps the two identical).
func marshalTOML(m *Manifest) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// hashChunk is how much encoding is handed to the hash at once: small enough to be
// hashed while still in the cache.
const hashChunk = 64 << 10

// ComputeID returns the release id of m: the SHA-256 of its canonical encoding with the
// ID field empty. It sorts m in place.
func ComputeID(m *Manifest) (string, error) {
	m.Sort()
	// Encode a chunk at a time into one small buffer, hashing each.
	h := sha256.New()
	b, _, ok := appendTop(make([]byte, 0, 2*hashChunk), m, "")
	for i := 0; ok && i < len(m.Packages); i++ {
		if len(b) >= hashChunk {
			h.Write(b)
			b = b[:0]
		}
		b, ok = appendPackage(b, &m.Packages[i])
	}
	for i := 0; ok && i < len(m.Files); i++ {
		if len(b) >= hashChunk {
			h.Write(b)
			b = b[:0]
		}
		b, ok = appendFile(b, &m.Files[i])
	}
	if !ok {
		c := *m
		c.ID = ""
		data, err := marshalTOML(&c)
		if err != nil {
			return "", err
		}
		h.Reset()
		b = data
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Seal sorts m, computes its ID and stores it in m.ID.
func Seal(m *Manifest) error {
	id, err := ComputeID(m)
	if err != nil {
		return err
	}
	m.ID = id
	return nil
}

// SealMarshal seals m (sets m.ID as Seal does) and returns exactly the bytes Marshal(m)
// would return afterwards, encoding the content once: a build that writes its manifest
// needs both, and at 100,000 packages each encoding is a measurable part of a build.
func SealMarshal(m *Manifest) ([]byte, error) {
	return StartSeal(m).Finish(m.Files)
}

// Sealer is SealMarshal in two steps, for a caller that knows a manifest's packages before
// its files: StartSeal encodes and hashes the top and the packages, nearly all the work
// for a large manifest, on its own goroutine while the caller goes on; Finish adds the
// files and seals.
//
// The encoding is written with room for the id and hashed without it (which is the
// encoding with an empty id), a chunk at a time as it grows; then the id is written into
// its room. A part handed to the hash is never written again: when the buffer grows, the
// part stays in the old array, which holds the same bytes.
type Sealer struct {
	m      *Manifest
	top    Manifest // m without its files, for the goroutine
	done   chan struct{}
	b      []byte
	idAt   int
	hashed int // the encoding before it has been hashed
	h      hash.Hash
	ok     bool // the encoding is on the fast path so far
}

const idRoom = 2 * sha256.Size

// StartSeal starts sealing m. It sorts m.Packages first, if they are not sorted. Until
// Finish returns, the caller may read m.Packages but nothing but Finish may change m.
func StartSeal(m *Manifest) *Sealer {
	if !packagesSorted(m.Packages) {
		slices.SortFunc(m.Packages, comparePackages)
	}
	s := &Sealer{m: m, top: *m, done: make(chan struct{}), h: sha256.New()}
	s.top.Files = nil
	go func() {
		defer close(s.done)
		s.encodePackages()
	}()
	return s
}

func (s *Sealer) encodePackages() {
	m := &s.top
	var id [idRoom]byte
	s.b = make([]byte, 0, canonicalSize(m, string(id[:]))+64<<10) // Finish grows it if the files need more
	s.b, s.idAt, s.ok = appendTop(s.b, m, string(id[:]))
	if !s.ok {
		return
	}
	// The hash of a large manifest follows the encoder on another goroutine, which ends
	// with the packages: Finish hashes the few files itself.
	write := s.h.Write
	if len(m.Packages) >= 4096 {
		parts, hashed := make(chan []byte, 64), make(chan struct{})
		go func() {
			for p := range parts {
				s.h.Write(p)
			}
			close(hashed)
		}()
		write = func(p []byte) (int, error) { parts <- p; return len(p), nil }
		defer func() {
			close(parts)
			<-hashed
		}()
	}
	write(s.b[:s.idAt])
	s.hashed = s.idAt + idRoom
	for i := 0; s.ok && i < len(m.Packages); i++ {
		if len(s.b)-s.hashed >= hashChunk {
			write(s.b[s.hashed:])
			s.hashed = len(s.b)
		}
		s.b, s.ok = appendPackage(s.b, &m.Packages[i])
	}
	write(s.b[s.hashed:])
	s.hashed = len(s.b)
}

// Finish sets m.Files to files, sorted, seals m and returns its encoding, the bytes
// Marshal(m) would return.
func (s *Sealer) Finish(files []File) ([]byte, error) {
	<-s.done
	m := s.m
	m.Files = files
	if !filesSorted(m.Files) {
		slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	}
	if s.ok {
		s.b = slices.Grow(s.b, filesSize(m.Files))
	}
	for i := 0; s.ok && i < len(m.Files); i++ {
		s.b, s.ok = appendFile(s.b, &m.Files[i])
	}
	if !s.ok {
		if err := Seal(m); err != nil {
			return nil, err
		}
		return marshalTOML(m)
	}
	s.h.Write(s.b[s.hashed:])
	hex.Encode(s.b[s.idAt:s.idAt+idRoom], s.h.Sum(nil))
	m.ID = string(s.b[s.idAt : s.idAt+idRoom])
	return s.b, nil
}

// ErrIDMismatch means a manifest's id is not the digest of its content: it was edited or
// damaged after it was written.
var ErrIDMismatch = errors.New("manifest id does not match its content")

// VerifyID checks that m.ID is the digest of m's canonical content.
func VerifyID(m *Manifest) error {
	id, err := ComputeID(m)
	if err != nil {
		return err
	}
	if id != m.ID {
		return fmt.Errorf("%w: id %s, content digest %s", ErrIDMismatch, m.ID, id)
	}
	return nil
}

// Decode reads a manifest strictly: unknown keys, wrong types and malformed TOML are
// errors naming the source and line. It then validates the manifest and checks its id.
// name labels errors (a file path or "store object <sha256>").
func Decode(r io.Reader, name string) (*Manifest, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", name, err)
	}
	return Parse(data, name)
}

// Parse is Decode on bytes already in memory.
func Parse(data []byte, name string) (*Manifest, error) {
	return parse(data, string(data), name)
}

// parse is Parse on data and its copy s (the decoded strings point into s). Input in the
// canonical form, which is all that armor writes, is read by the fast decoder, and its id
// is checked by hashing the input itself, since it is the canonical encoding; the hash of
// a large input runs on another core while the rest is decoded and validated.
func parse(data []byte, s string, name string) (*Manifest, error) {
	if m, d, idAt, ok := parseTop(s); ok {
		var sum [sha256.Size]byte
		hash := func() {
			h := sha256.New()
			h.Write(data[:idAt])
			h.Write(data[idAt+len(m.ID):])
			h.Sum(sum[:0])
		}
		wait := func() {}
		if len(data) < 1<<20 {
			hash()
		} else {
			done := make(chan struct{})
			go func() {
				defer close(done)
				hash()
			}()
			wait = func() { <-done }
		}
		ok := d.tables(m)
		var err error
		if ok {
			err = m.Validate()
		}
		wait()
		if ok {
			if err != nil {
				return nil, fmt.Errorf("manifest %s: %w", name, err)
			}
			if id := hex.EncodeToString(sum[:]); id != m.ID {
				return nil, fmt.Errorf("manifest %s: %w: id %s, content digest %s", name, ErrIDMismatch, m.ID, id)
			}
			return m, nil
		}
	}
	return parseTOML(data, name)
}

// parseTOML is Parse through go-toml alone: for input outside the canonical form, and
// for the tests that keep the fast decoder honest.
func parseTOML(data []byte, name string) (*Manifest, error) {
	var m Manifest
	if err := tomlfile.Decode(data, "manifest "+name, &m); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", name, err)
	}
	if err := VerifyID(&m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", name, err)
	}
	return &m, nil
}

// Load reads and decodes the manifest file at path.
func Load(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	// data is not written after this: the manifest's strings can share its memory
	// instead of a copy of 25 MB at 100,000 packages.
	return parse(data, unsafe.String(unsafe.SliceData(data), len(data)), path)
}
