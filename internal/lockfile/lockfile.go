// Package lockfile is the lock of one repository's working state (its build cache): a
// build holds it exclusively while it rewrites the tree and the manifest, and a push holds
// it shared while it reads both, so neither sees the other half-done.
package lockfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Lock takes the lock of the repository whose build cache is cacheDir: exclusive for a
// build, which rewrites the tree and the manifest, and shared for a reader of both, such
// as push. It returns the function that releases the lock. It does not wait: when another
// process holds the lock in a conflicting mode, it fails with an error naming the lock
// file. The lock is the kernel's (flock), so a process that dies releases it, and no
// stale lock is ever left to remove by hand. On NFS it holds across machines only where
// the mount supports locks (NFSv4, or v3 with lockd).
//
// A reader that finds no lock file and cannot create one (a read-only file system, a
// cache directory it may not write) goes without: no build can hold a lock that does not
// exist. A lock file it cannot open is an error, as a build may hold it.
func Lock(cacheDir string, exclusive bool) (unlock func(), err error) {
	path := filepath.Join(cacheDir, "lock")
	var f *os.File
	if exclusive {
		// Read-write: NFS emulates flock with POSIX locks, whose exclusive form needs it.
		if err = os.MkdirAll(cacheDir, 0o755); err == nil {
			f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		}
		if err == nil {
			// Readable by every reader whatever the builder's umask. (Where another user
			// owns the file the chmod fails, and the first build has done it.)
			_ = f.Chmod(0o644)
		}
	} else {
		f, err = os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			if err = os.MkdirAll(cacheDir, 0o755); err == nil {
				f, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
			}
			if errors.Is(err, unix.EROFS) || errors.Is(err, fs.ErrPermission) {
				return func() {}, nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another armor build or push of this repository holds %s; run this again when it has finished", path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
