package gen

import (
	"errors"
	"fmt"
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
// A reader that cannot create the lock file, on a read-only file system or in a cache
// directory it may not write, goes without: no build can be writing there either.
func Lock(cacheDir string, exclusive bool) (unlock func(), err error) {
	path := filepath.Join(cacheDir, "lock")
	flag, how := os.O_RDONLY|os.O_CREATE, unix.LOCK_SH
	if exclusive {
		// Read-write: NFS emulates flock with POSIX locks, whose exclusive form needs it.
		flag, how = os.O_RDWR|os.O_CREATE, unix.LOCK_EX
	}
	err = os.MkdirAll(cacheDir, 0o755)
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(path, flag, 0o644)
	}
	if err != nil {
		if !exclusive && (errors.Is(err, unix.EROFS) || errors.Is(err, os.ErrPermission)) {
			return func() {}, nil
		}
		return nil, fmt.Errorf("open lock %s: %w", path, err)
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
