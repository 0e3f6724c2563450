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
// stale lock is ever left to remove by hand.
func Lock(cacheDir string, exclusive bool) (unlock func(), err error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("create cache directory: %w", err)
	}
	path := filepath.Join(cacheDir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
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
