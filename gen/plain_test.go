package gen

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/armor-apt/armor/gen/index"
)

// TestKeptPlain: a kept uncompressed index comes back with room for a splice in place;
// a copy torn, damaged or of another size does not come back at all.
func TestKeptPlain(t *testing.T) {
	o := &Options{CacheDir: t.TempDir()}
	data := bytes.Repeat([]byte("Package: p\nVersion: 1\n\n"), 1000)
	d := digestsOf(data)
	keepPlain(o, d.SHA256, data)
	got, ok := keptPlain(o, d)
	if !ok || !bytes.Equal(got, data) || cap(got) < index.PlainCap(len(data)) {
		t.Fatalf("kept copy: ok %v, equal %v, capacity %d (want %d)", ok, bytes.Equal(got, data), cap(got), index.PlainCap(len(data)))
	}
	file := filepath.Join(plainDir(o), d.SHA256)
	kept, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, damaged := range map[string][]byte{
		"a byte changed": damage(kept),
		"zeros":          make([]byte, len(kept)), // the blocks of a write a crash lost
		"torn":           kept[:len(kept)-3],
	} {
		if err := os.WriteFile(file, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok := keptPlain(o, d); ok {
			t.Errorf("%s: the damaged copy came back", name)
		}
	}
	// The index kept again replaces a damaged copy.
	if err := os.WriteFile(file, damage(kept), 0o644); err != nil {
		t.Fatal(err)
	}
	keepPlain(o, d.SHA256, data)
	if _, ok := keptPlain(o, d); !ok {
		t.Error("a damaged copy was not replaced")
	}
	d.Size++
	if _, ok := keptPlain(o, d); ok {
		t.Error("a copy of another size came back")
	}
}

// damage returns b with its middle byte changed.
func damage(b []byte) []byte {
	b = bytes.Clone(b)
	b[len(b)/2] ^= 1
	return b
}
