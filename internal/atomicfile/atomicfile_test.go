package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f")
	if err := WriteFile(path, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "two" {
		t.Fatalf("read %q, %v; want two", got, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	assertNoTemp(t, filepath.Dir(path))
}

// TestWriteFailure: a fill that fails leaves the old file as it was and no temporary file.
func TestWriteFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	for _, durable := range []bool{true, false} {
		err := Write(path, 0o644, durable, func(w io.Writer) error {
			io.WriteString(w, "half")
			return boom
		})
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), path) {
			t.Fatalf("durable=%t: error %v, want boom naming %s", durable, err, path)
		}
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("file holds %q after failed writes, want old", got)
	}
	assertNoTemp(t, dir)
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), TempPrefix) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
