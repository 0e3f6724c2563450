//go:build unix

package gate

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps the file at path into memory, read-only, and returns the function that
// unmaps it. A file replaced by a rename while mapped stays as it was for the mapping.
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() == 0 || fi.Size() != int64(int(fi.Size())) {
		return nil, nil, fmt.Errorf("%s: %w: size %d", path, ErrSnapshot, fi.Size())
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		data, err = os.ReadFile(path)
		return data, func() {}, err
	}
	return data, func() { _ = syscall.Munmap(data) }, nil
}
