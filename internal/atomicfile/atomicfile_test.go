package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestStage: a staged file is not at its path until Commit, flushed or not, puts it
// there; Abort, and a Commit that cannot rename, leave no temporary file behind.
func TestStage(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "sub", "f")
		if err := WriteFile(path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Stage(path, []byte("new"), 0o640)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != "old" {
			t.Fatalf("staged: the path holds %q before Commit", got)
		}
		if err := s.Commit(flushed); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != "new" {
			t.Fatalf("committed (flushed %v): %q, %v", flushed, got, err)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
			t.Errorf("mode %v, want 0640", st.Mode().Perm())
		}
		assertNoTemp(t, filepath.Dir(path))
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	s, err := Stage(path, []byte("new"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s.Abort()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("aborted: %s exists (%v)", path, err)
	}
	assertNoTemp(t, dir)

	// A directory in the way: Commit fails, and removes the staged file.
	if err := os.MkdirAll(filepath.Join(path, "obstacle"), 0o755); err != nil {
		t.Fatal(err)
	}
	if s, err = Stage(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(true); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("commit over a directory: %v, want an error naming %s", err, path)
	}
	assertNoTemp(t, dir)

	// A directory that cannot be made: Stage fails.
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Stage(filepath.Join(file, "f"), nil, 0o644); err == nil {
		t.Error("staged under a regular file")
	}
}

// TestReplaceHoldsWithoutOpening: the file a write replaces is held across the rename
// without being opened for reading, so neither a FIFO (whose open would wait for a
// writer) nor a file the writer may not read stands in the way.
func TestReplaceHoldsWithoutOpening(t *testing.T) {
	dir := t.TempDir()
	fifo, unreadable := filepath.Join(dir, "fifo"), filepath.Join(dir, "unreadable")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unreadable, []byte("old"), 0o000); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, unreadable} {
		done := make(chan error, 1)
		go func() { done <- WriteFileUnsynced(p, []byte("new"), 0o644) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("writing over %s did not return", p)
		}
		if got, err := os.ReadFile(p); err != nil || string(got) != "new" {
			t.Errorf("%s: %q, %v", p, got, err)
		}
	}
}
