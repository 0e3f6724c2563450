// Package atomicfile is armor's one way to replace a file that someone may be reading or
// that must survive a crash: write a temporary file beside it, fsync it, rename it over
// the old one, then fsync the directory (as restic's local backend does). A reader, or
// a machine that loses power, sees the old content or the new, never a part.
package atomicfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// TempPrefix starts the name of every temporary file this package writes, so that a
// writer that died can be cleaned up after by name.
const TempPrefix = ".armor-tmp-"

// WriteFile replaces path with data, durably: temporary file, fsync, rename, fsync of
// the directory. It creates the directory if needed. On error path is untouched.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, true, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write replaces path with what fill writes, through a temporary file in the same
// directory and a rename. When durable, the file is fsynced before the rename and the
// directory after it; without, the rename is still atomic for readers but a crash may
// leave an empty or old file, which suits only caches that check what they read. On
// error the temporary file is removed and path is untouched.
func Write(path string, perm os.FileMode, durable bool, fill func(io.Writer) error) error {
	tmp, err := writeTemp(path, perm, durable, fill)
	if err != nil {
		return err
	}
	if err := replace(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if durable {
		return SyncDir(filepath.Dir(path))
	}
	return nil
}

// writeTemp writes what fill writes to a temporary file beside path, creating the
// directory, with perm and, when durable, fsynced; it returns the file's name. On error
// nothing is left.
func writeTemp(path string, perm os.FileMode, durable bool, fill func(io.Writer) error) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, TempPrefix+"*-"+filepath.Base(path))
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	err = fill(f)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return f.Name(), nil
}

// Staged is a file written under a temporary name beside its place, neither flushed
// nor in place yet: a caller that flushes the file system anyway (syncfs) stages the
// file before, and puts it in place after, instead of flushing it on its own.
type Staged struct {
	tmp, path string
}

// Stage writes data to a temporary file beside path, creating the directory, without
// flushing it. Commit puts it in place; Abort removes it.
func Stage(path string, data []byte, perm os.FileMode) (*Staged, error) {
	tmp, err := writeTemp(path, perm, false, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Staged{tmp: tmp, path: path}, nil
}

// Commit replaces the file's path with it, durably: unless flushed (its file system was
// flushed since Stage) it fsyncs the file first, then renames it and fsyncs the
// directory. On error the path is untouched and the staged file is removed.
func (s *Staged) Commit(flushed bool) error {
	var err error
	if !flushed {
		err = syncFile(s.tmp)
	}
	if err == nil {
		err = replace(s.tmp, s.path)
	}
	if err != nil {
		s.Abort()
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	return SyncDir(filepath.Dir(s.path))
}

// CommitUnsynced puts the staged file in place without flushing anything: readers never
// see a part, but a crash may leave the old file or an empty one, which suits only caches
// that check what they read (as WriteFileUnsynced). On error the path is untouched and
// the staged file is removed.
func (s *Staged) CommitUnsynced() error {
	if err := replace(s.tmp, s.path); err != nil {
		s.Abort()
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	return nil
}

// Abort removes the staged file.
func (s *Staged) Abort() { os.Remove(s.tmp) }

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// replace renames tmp over path. The file it replaces is held (an O_PATH descriptor)
// across the rename and let go in the background: dropping the last reference to a
// large file frees its pages there and then (for the manifest of 100,000 packages a
// measurable part of a build: docs/benchmarks.md), which the writer need not wait for.
func replace(tmp, path string) error {
	fd, herr := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	err := os.Rename(tmp, path)
	if herr == nil {
		go unix.Close(fd)
	}
	return err
}

// SyncDir fsyncs a directory, so that renames and new entries in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// WriteFileUnsynced replaces path with data through a temporary file and a rename,
// without fsync: readers never see a part, but a crash may leave the old file or an
// empty one. It suits only caches that check what they read.
func WriteFileUnsynced(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, false, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Link replaces dst by a hard link to src: a link under a temporary name beside dst,
// renamed over it. Readers see the old file or the new one; on error dst is untouched.
// It does not fsync the directory: a caller that needs the rename durable calls SyncDir.
func Link(src, dst string) error {
	tmp := filepath.Join(filepath.Dir(dst), TempPrefix+rand.Text()+"-"+filepath.Base(dst))
	if err := os.Link(src, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
