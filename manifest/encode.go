package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/armor-apt/armor/manifest/tomlfile"

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
	if m.plain() {
		b := make([]byte, 0, len(header)+64*6+len(m.Packages)*360+len(m.Files)*200)
		return appendCanonical(append(b, header...), m), nil
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

// ComputeID returns the release id of m: the SHA-256 of its canonical encoding with the
// ID field empty. It sorts m in place.
func ComputeID(m *Manifest) (string, error) {
	c := *m
	c.ID = ""
	b, err := Marshal(&c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
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
	fast, ok := parseCanonical(data)
	if ok {
		return checkDecoded(fast, name)
	}
	var m Manifest
	if err := tomlfile.Decode(data, "manifest "+name, &m); err != nil {
		return nil, err
	}
	return checkDecoded(&m, name)
}

func checkDecoded(m *Manifest, name string) (*Manifest, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", name, err)
	}
	if err := VerifyID(m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", name, err)
	}
	return m, nil
}

// Load reads and decodes the manifest file at path.
func Load(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return Parse(data, path)
}
